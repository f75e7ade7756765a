import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { prng } from '../../examples/load-generator.js';

/**
 * A local HTTP service for the async-operator tests and bench: `GET /enrich?k=..&seq=..` answers
 * `{ tag: "<k>:<seq>" }` after `latencyMs`, or HTTP 500 for a fraction `errorRate` of calls, or
 * never (the socket stays open) for the keys in `hang`. It counts calls, errors and the calls in
 * progress (their peak too).
 */
export interface EnrichService {
  readonly url: string;
  readonly stats: { calls: number; errors: number; hung: number; inFlight: number; peak: number };
  /** Calls answered with a tag, per `<k>:<seq>` (a record may be called more than once). */
  readonly answered: Map<string, number>;
  close(): Promise<void>;
}

export async function startEnrichService(opts: {
  latencyMs: number;
  errorRate?: number;
  hang?: ReadonlySet<string>;
  seed?: number;
}): Promise<EnrichService> {
  const random = prng(opts.seed ?? 99);
  const stats = { calls: 0, errors: 0, hung: 0, inFlight: 0, peak: 0 };
  const answered = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    const k = u.searchParams.get('k') ?? '';
    const seq = u.searchParams.get('seq') ?? '';
    stats.calls++;
    if (opts.hang?.has(k)) {
      stats.hung++;
      return; // never answered: the caller's timeout must fire
    }
    stats.inFlight++;
    stats.peak = Math.max(stats.peak, stats.inFlight);
    setTimeout(() => {
      stats.inFlight--;
      if (random() < (opts.errorRate ?? 0)) {
        stats.errors++;
        res.writeHead(500).end('boom');
        return;
      }
      const tag = `${k}:${seq}`;
      answered.set(tag, (answered.get(tag) ?? 0) + 1);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ tag }));
    }, opts.latencyMs);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    stats,
    answered,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
