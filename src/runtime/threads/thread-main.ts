/**
 * A stream thread (`processing.threads`): the entry of one `worker_thread` of a `sluice run`
 * process. It loads the job itself (modules are per thread), starts one worker on its share of
 * the config (thread-config.ts) without an HTTP server, and answers the process's main thread
 * (threaded.ts) over its message port: metrics, health, status, the worker's routes (status page,
 * topology, state queries) and stop. Events it sends on its own: `started`, `fatal`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { loadJob } from '../../cli/load-job.js';
import type { SluiceConfig } from '../../config/schema.js';
import { workerRoutes } from '../../ops/http-routes.js';
import { createLogger } from '../../ops/logger.js';
import { NODE_METRICS_PREFIX } from '../../ops/metrics.js';
import { secretsOf } from '../../ops/redact.js';
import { type RunningWorker, startWorker } from '../start.js';
import { captureRoute, type ThreadReply, type ThreadRequest, toWireError } from './thread-protocol.js';
import { placeholderStatus } from './thread-status.js';

export interface ThreadData {
  jobFile: string;
  config: SluiceConfig;
  index: number;
  /** The URL this thread's worker advertises (the process's server, `/t/<index>`). */
  advertise: string | undefined;
}

const port = parentPort;
if (!port) throw new Error('thread-main.js runs only as a worker_thread');
const data = workerData as ThreadData;
const logger = createLogger({
  level: data.config.log.level,
  format: data.config.log.format,
  secrets: secretsOf(data.config),
}).child({ thread: data.index });

/**
 * The worker's metrics, and Node's that belong to this thread's own V8 isolate (`nodejs_*`: event
 * loop lag, heap, GC) labelled `thread`; the process-wide ones (CPU, RSS, fds) are the main
 * thread's, counted once.
 */
const registry = new Registry();
collectDefaultMetrics({
  register: registry,
  prefix: NODE_METRICS_PREFIX,
  labels: { thread: String(data.index) },
});
for (const m of registry.getMetricsAsArray())
  if (!m.name.startsWith(`${NODE_METRICS_PREFIX}nodejs_`)) registry.removeSingleMetric(m.name);

let running: RunningWorker | undefined;
let routes: ReturnType<typeof workerRoutes> | undefined;
let stopping: Promise<void> | undefined;

const starting = (async () => {
  try {
    const app = await loadJob(data.jobFile);
    running = await startWorker(app, data.config, {
      logger,
      registry,
      advertise: () => data.advertise,
      onFatal: (e) => port.postMessage({ event: 'fatal', error: toWireError(e) }),
    });
    routes = workerRoutes(running.worker);
    port.postMessage({ event: 'started' });
  } catch (e) {
    port.postMessage({ event: 'fatal', error: toWireError(e) });
  }
})();

/** What a thread says while its worker starts (joins, prepares topics, restores). */
const STARTING = { ready: false, reason: 'starting' };

function answer(req: ThreadRequest): Promise<unknown> {
  // A stop asked for while the worker starts waits for the start, then stops it.
  if (req.op === 'stop') {
    // The log is written asynchronously from a thread: its last lines are flushed before the
    // answer, after which the main thread ends the thread.
    stopping ??= starting
      .then(() => running?.stop({ leaveGroup: req.leaveGroup }))
      .finally(() => new Promise<void>((r) => logger.flush(() => r())));
    return stopping;
  }
  const r = running;
  if (!r || !routes) {
    if (req.op === 'live') return Promise.resolve(true);
    if (req.op === 'ready') return Promise.resolve(STARTING);
    if (req.op === 'metrics') return registry.getMetricsAsJSON();
    if (req.op === 'status') return Promise.resolve(placeholderStatus('starting', STARTING.reason));
    return Promise.reject(new Error(`thread ${data.index} is starting`));
  }
  const w = r.worker;
  switch (req.op) {
    case 'metrics':
      return registry.getMetricsAsJSON();
    case 'live':
      return Promise.resolve(w.liveness());
    case 'ready':
      return Promise.resolve(w.readiness());
    case 'status':
      return w.group.firstRead(2000).then(() => JSON.parse(JSON.stringify(w.status())));
    case 'http':
      return captureRoute(routes, req.path, req.headers);
  }
}

port.on('message', (req: ThreadRequest) => {
  Promise.resolve()
    .then(() => answer(req))
    .then((value) => port.postMessage({ id: req.id, ok: true, value } satisfies ThreadReply))
    // A failed request, or an answer that cannot be copied to the main thread (DataCloneError).
    .catch((e) => port.postMessage({ id: req.id, ok: false, error: toWireError(e) } satisfies ThreadReply));
});
