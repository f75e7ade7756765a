/**
 * A stateless job: drop bot clicks, tag the rest, write them out.
 *   sluice dev examples/clicks.ts
 */
import { App, json, string } from 'sluice';

export interface Click {
  user: string;
  page: string;
  bot: boolean;
  ts: number;
}

export interface TaggedClick extends Click {
  section: string;
}

const app = new App({ id: process.env.CLICKS_APP_ID ?? 'clicks-enrich' });

app
  .stream('clicks', { key: string(), value: json<Click>() })
  .filter((c) => !c.bot)
  .map((c): TaggedClick => ({ ...c, section: c.page.split('/')[1] ?? 'home' }))
  .to('human-clicks', { value: json<TaggedClick>() });

export default app;
