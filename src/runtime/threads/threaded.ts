/**
 * A `sluice run` process with several stream threads (`processing.threads`, Kafka Streams'
 * `num.stream.threads`). Each thread is a worker_thread running one worker of the app
 * (thread-main.ts), a group member of its own, on its share of the config (thread-config.ts).
 * This, the main thread, runs no task: it serves the process's one HTTP server and speaks for
 * the threads, and stops them all on a signal or when one fails.
 *
 * HTTP: `/metrics` sums the threads' series (prom-client's cluster aggregation) next to the
 * process's own (CPU, memory, GC: counted once, here); `/healthz` and `/readyz` hold when every
 * thread's does; `/status` merges their documents (thread-status.ts). `/t/<i>/...` is thread i's
 * own surface, the address its worker advertises to the group, so a state query forwarded by
 * another worker reaches the thread that owns the key. `/state/<store>/<key>` asks the threads
 * here first, and goes on to the owner elsewhere only when none of them has the key.
 */
import type { ServerResponse } from 'node:http';
import { Worker as Thread } from 'node:worker_threads';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { SluiceConfig } from '../../config/schema.js';
import { exposureWarning } from '../../ops/auth.js';
import { FORWARDED_HEADER, sendJson } from '../../ops/http-routes.js';
import { type OpsServer, type Route, startOpsServer } from '../../ops/http-server.js';
import { createLogger, type Logger } from '../../ops/logger.js';
import { createRegistry } from '../../ops/metrics.js';
import { secretsOf } from '../../ops/redact.js';
import { advertisedUrl } from '../start.js';
import { threadConfig } from './thread-config.js';
import type { ThreadData } from './thread-main.js';
import {
  type CapturedResponse,
  fromWireError,
  type ThreadEvent,
  type ThreadReply,
  type ThreadRequest,
} from './thread-protocol.js';
import { mergeThreadStatus, placeholderStatus } from './thread-status.js';

/** How long a stop may take per thread: below run-command's 30 s for the whole process. */
const STOP_GRACE_MS = 25_000;
/** How long a thread may take to answer the main thread (metrics, health, status, a route). */
const CALL_TIMEOUT_MS = 10_000;
/** How long the other threads get to stop when one failed to start. */
const START_FAILED_GRACE_MS = 5000;

type Metrics = MetricObjectWithValues<MetricValue<string>>[];
type Op = ThreadRequest extends infer R ? (R extends unknown ? Omit<R, 'id'> : never) : never;

/** One worker_thread and the requests waiting for its answers. */
class StreamThread {
  readonly index: number;
  /** Settles when the thread's worker has started (rejects with the error that stopped it). */
  readonly started: Promise<void>;
  #thread: Thread;
  #next = 1;
  #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  #stopping = false;
  #exited = false;
  readonly exited: Promise<void>;

  readonly #onStopError: (e: Error) => void;

  constructor(index: number, data: ThreadData, onFatal: (e: Error) => void, onStopError: (e: Error) => void) {
    this.index = index;
    this.#onStopError = onStopError;
    let ready!: () => void;
    let failed!: (e: Error) => void;
    let isStarted = false;
    this.started = new Promise<void>((res, rej) => {
      ready = () => {
        isStarted = true;
        res();
      };
      failed = rej;
    });
    this.started.catch(() => undefined);
    const fail = (e: Error) => (isStarted ? onFatal(e) : failed(e));
    this.#thread = new Thread(new URL('./thread-main.js', import.meta.url), { workerData: data });
    this.#thread.on('message', (m: ThreadReply | ThreadEvent) => {
      if ('event' in m) {
        if (m.event === 'started') ready();
        else fail(fromWireError(m.error, isStarted ? `thread ${index}: ` : ''));
        return;
      }
      const p = this.#pending.get(m.id);
      if (!p) return;
      this.#pending.delete(m.id);
      if (m.ok) p.resolve(m.value);
      else p.reject(fromWireError(m.error));
    });
    // An exception no code caught in the thread ends it: the process stops as after a fatal error.
    this.#thread.on('error', (e) => fail(new Error(`thread ${index} crashed: ${e.message}`, { cause: e })));
    this.exited = new Promise<void>((res) =>
      this.#thread.once('exit', (code) => {
        this.#exited = true;
        for (const p of this.#pending.values()) p.reject(new Error(`thread ${index} exited`));
        this.#pending.clear();
        if (!this.#stopping) fail(new Error(`thread ${index} exited (code ${code}) without being stopped`));
        res();
      }),
    );
  }

  /** Asks the thread; a thread busy for `timeoutMs` (a long synchronous operator) gets no answer. */
  call(op: Op, timeoutMs = CALL_TIMEOUT_MS): Promise<unknown> {
    if (this.#exited) return Promise.reject(new Error(`thread ${this.index} exited`));
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`thread ${this.index} did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      const settle =
        <T>(f: (v: T) => void) =>
        (v: T) => {
          clearTimeout(timer);
          f(v);
        };
      this.#pending.set(id, { resolve: settle(resolve), reject: settle(reject) });
      this.#thread.postMessage({ ...op, id });
    });
  }

  /**
   * Graceful stop (the worker checkpoints and closes), then the thread ends. A thread that ended
   * already has had its error reported; one whose stop fails or takes past `graceMs` is ended
   * (under exactly-once what it had not committed is aborted, never half-visible).
   */
  async stop(leaveGroup: boolean | undefined, graceMs = STOP_GRACE_MS): Promise<void> {
    this.#stopping = true;
    try {
      if (!this.#exited) await this.call({ op: 'stop', leaveGroup }, graceMs);
    } catch (e) {
      if (!this.#exited) this.#onStopError(new Error(`thread ${this.index}: ${(e as Error).message}`));
    } finally {
      await this.#thread.terminate();
      await this.exited;
    }
  }
}

export interface RunningThreads {
  readonly logger: Logger;
  readonly http: OpsServer | undefined;
  readonly threads: number;
  stop(opts?: { leaveGroup?: boolean }): Promise<void>;
}

function sendCaptured(res: ServerResponse, c: CapturedResponse): void {
  res.writeHead(c.status, c.headers);
  res.end(c.body);
}

const sendError = (res: ServerResponse, status: number, message: string) =>
  sendJson(res, status, { error: message });

/** Starts `config.processing.threads` stream threads running the job in `jobFile`. */
export async function startThreaded(
  jobFile: string,
  config: Readonly<SluiceConfig>,
  opts: { onFatal: (e: Error) => void },
): Promise<RunningThreads> {
  const n = config.processing.threads;
  // `auto` is decided here, where stdout is the terminal if there is one.
  const format =
    config.log.format === 'auto' ? (process.stdout.isTTY === true ? 'pretty' : 'json') : config.log.format;
  const logger = createLogger({ level: config.log.level, format, secrets: secretsOf(config) });
  const registry = createRegistry();
  const threads: StreamThread[] = [];
  let http: OpsServer | undefined;
  if (config.http.enabled) {
    http = await startOpsServer({
      host: config.http.host,
      port: config.http.port,
      logger,
      auth: { token: config.http.authToken, metrics: config.http.authMetrics },
      registry: {
        contentType: registry.contentType,
        metrics: async () => {
          const parts = await Promise.all([
            registry.getMetricsAsJSON(),
            ...threads.map((t) => (t.call({ op: 'metrics' }) as Promise<Metrics>).catch(() => [])),
          ]);
          return AggregatorRegistry.aggregate(parts).metrics();
        },
      },
      health: {
        live: async () =>
          (await Promise.all(threads.map((t) => t.call({ op: 'live' }).catch(() => false)))).every(Boolean),
        ready: async () => {
          for (const t of threads) {
            const r = (await t
              .call({ op: 'ready' })
              .catch((e: Error) => ({ ready: false, reason: e.message }))) as {
              ready: boolean;
              reason?: string;
            };
            if (!r.ready) return { ready: false, reason: `thread ${t.index}: ${r.reason ?? 'starting'}` };
          }
          return { ready: threads.length === n };
        },
        status: async () =>
          mergeThreadStatus(
            await Promise.all(
              threads.map((t) =>
                (t.call({ op: 'status' }) as Promise<Record<string, unknown>>).catch((e: Error) =>
                  placeholderStatus('failed', e.message),
                ),
              ),
            ),
          ),
      },
      routes: threadRoutes(threads),
    });
    logger.info({ url: http.url, threads: n }, `metrics at ${http.url}/metrics`);
    const exposed = exposureWarning(config.http.host, { token: config.http.authToken });
    if (exposed) logger.warn(exposed);
  }
  const base = http ? advertisedUrl(config.http, http.port) : undefined;
  const stopErrors: Error[] = [];
  let fatal = false;
  const onFatal = (e: Error) => {
    if (fatal) return;
    fatal = true;
    // As Kafka Streams' SHUTDOWN_CLIENT: one thread's fatal error stops the process's every thread.
    logger.error({ err: e }, 'a stream thread failed; stopping every thread');
    opts.onFatal(e);
  };
  for (let i = 0; i < n; i++)
    threads.push(
      new StreamThread(
        i,
        {
          jobFile,
          config: { ...threadConfig(config, i, n), log: { ...config.log, format } },
          index: i,
          advertise: base && `${base}/t/${i}`,
        },
        onFatal,
        (e) => {
          stopErrors.push(e);
          logger.error({ err: e }, 'stream thread stop failed; ending it');
        },
      ),
    );
  const stop = async (o: { leaveGroup?: boolean } = {}) => {
    try {
      await Promise.all(threads.map((t) => t.stop(o.leaveGroup)));
    } finally {
      await http?.close();
    }
    if (stopErrors.length > 0) throw stopErrors[0];
  };
  try {
    // The first thread that fails to start fails the start: the others, maybe still retrying to
    // reach Kafka, are stopped (a starting one is ended after a short grace: it committed nothing).
    await Promise.all(threads.map((t) => t.started));
  } catch (e) {
    await Promise.all(threads.map((t) => t.stop(false, START_FAILED_GRACE_MS)));
    await http?.close();
    throw e;
  }
  logger.info({ threads: n }, `${n} stream threads started`);
  return { logger, http, threads: n, stop };
}

/** Headers a thread's routes read: the token and the forwarding mark. */
function passedHeaders(h: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of ['authorization', FORWARDED_HEADER]) if (typeof h[k] === 'string') out[k] = h[k] as string;
  return out;
}

function threadRoutes(threads: readonly StreamThread[]): Route[] {
  const http = (t: StreamThread, path: string, headers: Record<string, string>) =>
    t.call({ op: 'http', path, headers }) as Promise<CapturedResponse>;
  const json = (res: ServerResponse, body: unknown) => {
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify(body, null, 2));
  };
  return [
    // `/t/<i>/...`: thread i's own surface.
    async (req, res, url) => {
      const m = /^\/t\/(\d+)(\/.*)?$/.exec(url.pathname);
      if (!m) return false;
      const t = threads[Number(m[1])];
      if (!t) {
        sendError(res, 404, `no thread ${m[1]} (this process runs ${threads.length})`);
        return true;
      }
      // The status page fetches `status` relative to itself: it must be read at `/t/<i>/`.
      if (m[2] === undefined) {
        res.writeHead(301, { location: `${url.pathname}/${url.search}` });
        res.end();
        return true;
      }
      const path = m[2];
      try {
        if (path === '/status') json(res, await t.call({ op: 'status' }));
        else if (path === '/metrics') {
          const parts = [(await t.call({ op: 'metrics' })) as Metrics];
          const r = AggregatorRegistry.aggregate(parts);
          res.writeHead(200, { 'content-type': r.contentType, 'cache-control': 'no-store' });
          res.end(await r.metrics());
        } else if (path === '/healthz' || path === '/readyz') {
          const r =
            path === '/healthz'
              ? { ready: (await t.call({ op: 'live' })) as boolean }
              : ((await t.call({ op: 'ready' })) as { ready: boolean; reason?: string });
          res.writeHead(r.ready ? 200 : 503, { 'content-type': 'text/plain; charset=utf-8' });
          res.end(r.ready ? 'ok\n' : `not ready: ${'reason' in r ? r.reason : 'not live'}\n`);
        } else sendCaptured(res, await http(t, `${path}${url.search}`, passedHeaders(req.headers)));
      } catch (e) {
        sendError(res, 503, `thread ${t.index}: ${(e as Error).message}`);
      }
      return true;
    },
    // A state query: the threads here first (each answers only for its own tasks), then thread 0
    // without that restriction, which forwards it to the owner in another process.
    async (req, res, url) => {
      if (!url.pathname.startsWith('/state/') || url.pathname.split('/').length !== 4) return false;
      const headers = passedHeaders(req.headers);
      const local = { ...headers, [FORWARDED_HEADER]: headers[FORWARDED_HEADER] ?? 'local-threads' };
      let last: CapturedResponse | undefined;
      try {
        for (const t of threads) {
          last = await http(t, url.pathname, local);
          if (last.status !== 503) break;
        }
        if (last!.status === 503 && !headers[FORWARDED_HEADER])
          last = await http(threads[0]!, url.pathname, headers);
        sendCaptured(res, last!);
      } catch (e) {
        sendError(res, 503, (e as Error).message);
      }
      return true;
    },
    // The status page, the topology and the store list: the same from every thread.
    async (req, res, url) => {
      try {
        sendCaptured(
          res,
          await http(threads[0]!, `${url.pathname}${url.search}`, passedHeaders(req.headers)),
        );
      } catch (e) {
        sendError(res, 503, (e as Error).message);
      }
      return true;
    },
  ];
}
