/**
 * The demo job: live page-view counts. Reads clicks, drops bots, re-keys by page (through the
 * repartition topic `<appId>-by-page-repartition`), keeps a running count per page in RocksDB
 * (store `views-agg`, changelog `<appId>-views-agg-changelog`) and writes `{page, views}` keyed by
 * page, once per click.
 *   sluice dev examples/page-views.ts        # or: npm run demo
 *
 * The app id is `page-views`, or DEMO_APP_ID when set.
 */
import { App, json, string } from 'sluice';

export interface Click {
  user: string;
  page: string;
  bot: boolean;
  ts: number;
}

export interface PageViews {
  page: string;
  views: number;
}

export interface PageViewsOptions {
  /** Default DEMO_APP_ID, else `page-views`. */
  id?: string;
  /** Default `clicks`. */
  input?: string;
  /** Default `page-views`. */
  output?: string;
}

/** Builds the page-views app; the default export is this with the defaults. */
export function pageViewsApp(opts: PageViewsOptions = {}): App {
  const app = new App({ id: opts.id ?? process.env.DEMO_APP_ID ?? 'page-views' });
  app
    .stream(opts.input ?? 'clicks', { key: string(), value: json<Click>() })
    .filter((c) => !c.bot)
    .keyBy((c) => c.page, { name: 'by-page' })
    .count({ name: 'views' })
    .map((views, ctx): PageViews => ({ page: ctx.key, views }))
    .to(opts.output ?? 'page-views', { value: json<PageViews>() });
  return app;
}

export default pageViewsApp();
