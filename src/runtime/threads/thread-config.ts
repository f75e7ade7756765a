/**
 * The config of stream thread `index` of `count` in one `sluice run` process
 * (`processing.threads`): each thread is a worker of its own, so what must differ between two
 * workers differs here, and the process's memory bounds are shared out.
 *
 * - State: thread 0 keeps `state.dir` (a process going from 1 to N threads keeps its state),
 *   thread i > 0 uses `<state.dir>/thread-<i>`. Each folder holds its own instance id, so each
 *   thread is a static member of its own that a restart brings back with its tasks.
 * - `kafka.groupInstanceId`, when set: thread 0 joins as `<id>`, thread i as `<id>-t<i>`.
 * - `state.cacheMaxBytes`, `state.recordCacheMaxBytes` and `processing.asyncMaxBytes`: divided by
 *   the thread count (as Kafka Streams divides `statestore.cache.max.bytes` between its threads);
 *   `asyncMaxBytes` keeps at least its schema minimum.
 * - `kafka.clientId`: `<clientId>-t<i>`, so the broker's logs and quotas tell the threads apart.
 * - HTTP: off in the threads; the process's one server answers for all of them.
 */
import { join } from 'node:path';
import type { SluiceConfig } from '../../config/schema.js';

/** The folder thread `index` keeps its state in. */
export function threadStateDir(dir: string, index: number): string {
  return index === 0 ? dir : join(dir, `thread-${index}`);
}

export function threadConfig(config: Readonly<SluiceConfig>, index: number, count: number): SluiceConfig {
  const share = (n: number) => Math.floor(n / count);
  const id = config.kafka.groupInstanceId;
  return {
    ...config,
    kafka: {
      ...config.kafka,
      clientId: `${config.kafka.clientId}-t${index}`,
      ...(id !== undefined ? { groupInstanceId: index === 0 ? id : `${id}-t${index}` } : {}),
    },
    processing: {
      ...config.processing,
      threads: 1,
      asyncMaxBytes: Math.max(1024, share(config.processing.asyncMaxBytes)),
    },
    state: {
      ...config.state,
      dir: threadStateDir(config.state.dir, index),
      cacheMaxBytes: share(config.state.cacheMaxBytes),
      recordCacheMaxBytes: share(config.state.recordCacheMaxBytes),
    },
    http: { ...config.http, enabled: false },
  };
}
