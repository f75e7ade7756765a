import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { authorize, type HttpAuth } from './auth.js';
import type { Logger } from './logger.js';

export interface Health {
  /** Live: the process works (event loop turns, worker not crashed). */
  live(): boolean | Promise<boolean>;
  /** Ready: member of the group, every owned task restored and processing. */
  ready(): { ready: boolean; reason?: string } | Promise<{ ready: boolean; reason?: string }>;
  /** Status document for /status (or a promise of it). */
  status?(): unknown;
}

export type Route = (req: IncomingMessage, res: ServerResponse, url: URL) => boolean | Promise<boolean>;

export interface OpsServer {
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

function send(res: ServerResponse, code: number, body: string, type = 'text/plain; charset=utf-8'): void {
  res.writeHead(code, { 'content-type': type, 'cache-control': 'no-store' });
  res.end(body);
}

/** The worker's HTTP surface: /metrics, /healthz, /readyz, /status, plus extra routes. */
export async function startOpsServer(opts: {
  host: string;
  port: number;
  /** What /metrics shows: a registry, or anything that renders like one (stream threads' sum). */
  registry: Pick<Registry, 'metrics' | 'contentType'>;
  health: Health;
  logger: Logger;
  routes?: Route[];
  /** Bearer token for /status, /state/* and `/` (and /metrics with `auth.metrics`). */
  auth?: HttpAuth;
}): Promise<OpsServer> {
  const { registry, health, logger } = opts;
  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    try {
      // Checked on the same parsed path the routes below see, before any of them runs.
      if (opts.auth && !authorize(req, res, url.pathname, opts.auth)) return;
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'method not allowed\n');
      switch (url.pathname) {
        case '/metrics':
          return send(res, 200, await registry.metrics(), registry.contentType);
        case '/healthz':
          return (await health.live()) ? send(res, 200, 'ok\n') : send(res, 503, 'not live\n');
        case '/readyz': {
          const r = await health.ready();
          return r.ready
            ? send(res, 200, 'ready\n')
            : send(res, 503, `not ready: ${r.reason ?? 'starting'}\n`);
        }
        case '/status':
          return send(res, 200, JSON.stringify((await health.status?.()) ?? {}, null, 2), 'application/json');
      }
      for (const route of opts.routes ?? []) if (await route(req, res, url)) return;
      send(res, 404, 'not found\n');
    } catch (e) {
      logger.error({ err: e, path: url.pathname }, 'http handler failed');
      if (!res.headersSent) send(res, 500, 'internal error\n');
      else res.end();
    }
  });
  // Pollers (Prometheus, dashboards, tests) come back every few seconds on a kept-alive socket;
  // with Node's 5 s default the server may close it just as a request goes out (ECONNRESET).
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}`;
  return {
    url,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
