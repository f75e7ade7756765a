import { hostname } from 'node:os';
import type { Registry } from 'prom-client';
import type { App } from '../api/app.js';
import type { SluiceConfig } from '../config/schema.js';
import { exposureWarning } from '../ops/auth.js';
import { workerRoutes } from '../ops/http-routes.js';
import { type OpsServer, startOpsServer } from '../ops/http-server.js';
import { createLogger, type Logger } from '../ops/logger.js';
import { createRegistry } from '../ops/metrics.js';
import { secretsOf } from '../ops/redact.js';
import { claimGroupInstance } from './instance-id.js';
import { openTaskState } from './restore.js';
import { Worker } from './worker.js';

export interface RunningWorker {
  readonly worker: Worker;
  readonly http: OpsServer | undefined;
  readonly logger: Logger;
  readonly registry: Registry;
  /** The KIP-345 group.instance.id this worker joined with (undefined: a dynamic member). */
  readonly groupInstanceId: string | undefined;
  /**
   * Graceful stop (checkpoint, close the HTTP server). A static member stays in the group unless
   * `leaveGroup` (default `kafka.leaveGroupOnClose`) says to leave it; a dynamic one always leaves.
   */
  stop(opts?: { leaveGroup?: boolean }): Promise<void>;
}

/**
 * Starts one worker of an app with its HTTP server (/metrics, /healthz, /readyz, /status).
 * @example const w = await startWorker(app, loadConfig()); ... await w.stop();
 */
export async function startWorker(
  app: App,
  config: Readonly<SluiceConfig>,
  opts: {
    logger?: Logger;
    registry?: Registry;
    onFatal?: (e: Error) => void;
    /** The address to advertise when this worker has no HTTP server of its own (a stream thread's). */
    advertise?: () => string | undefined;
  } = {},
): Promise<RunningWorker> {
  const logger =
    opts.logger ??
    createLogger({ level: config.log.level, format: config.log.format, secrets: secretsOf(config) });
  const registry = opts.registry ?? createRegistry();
  if (config.processing.threads > 1)
    logger.warn(
      { threads: config.processing.threads },
      'processing.threads is for sluice run and sluice dev (each thread loads the job file); startWorker runs one worker',
    );
  const instance = await claimGroupInstance(config, app.id, logger);
  if (instance)
    logger.info(
      { groupInstanceId: instance.id, source: instance.source },
      'static group member (KIP-345): a restart within kafka.sessionTimeoutMs keeps its tasks',
    );
  let http: OpsServer | undefined;
  const worker = new Worker({
    app,
    config,
    logger,
    registry,
    // The cache bound is the worker's: a task gets its share when it opens, and a new one at
    // every assignment.
    openState: (task, ctx) =>
      openTaskState(task, { ...ctx, config, appId: app.id, cacheBytes: worker.cacheShare() }),
    onFatal: opts.onFatal,
    httpAddress: () => (http ? advertisedUrl(config.http, http.port) : opts.advertise?.()),
    groupInstanceId: instance?.id,
    leaveGroupOnStop: config.kafka.leaveGroupOnClose || instance?.ephemeral === true,
  });
  // Names that a redeploy with one more operator would shift (state lost, topics orphaned).
  for (const w of worker.topology.warnings) logger.warn({ app: app.id }, w);
  if (config.http.enabled) {
    http = await startOpsServer({
      host: config.http.host,
      port: config.http.port,
      registry,
      logger,
      auth: { token: config.http.authToken, metrics: config.http.authMetrics },
      health: {
        live: () => worker.liveness(),
        ready: () => worker.readiness(),
        // The first read waits (≤ 2 s) for the group's first DescribeGroups, not an empty group.
        status: () => worker.group.firstRead(2000).then(() => worker.status()),
      },
      routes: workerRoutes(worker),
    });
    logger.info({ url: http.url }, `metrics at ${http.url}/metrics`);
    const exposed = exposureWarning(config.http.host, { token: config.http.authToken });
    if (exposed) logger.warn(exposed);
  }
  try {
    await worker.start();
  } catch (e) {
    await http?.close();
    await worker.stop().catch(() => undefined);
    instance?.release();
    throw e;
  }
  return {
    worker,
    http,
    logger,
    registry,
    groupInstanceId: instance?.id,
    async stop(o = {}) {
      try {
        await worker.stop(o);
        await http?.close();
      } finally {
        instance?.release();
      }
    },
  };
}

/**
 * The URL other workers reach this one at: `http.advertisedUrl` when set; else the listen address,
 * with the machine's hostname in place of a wildcard host (0.0.0.0 or ::), which no peer can dial.
 */
export function advertisedUrl(
  http: { host: string; advertisedUrl?: string | undefined },
  port: number,
): string {
  if (http.advertisedUrl) return http.advertisedUrl.replace(/\/+$/, '');
  const wildcard = http.host === '0.0.0.0' || http.host === '::' || http.host === '[::]';
  const host = wildcard ? hostname() : http.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
