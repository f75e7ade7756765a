import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import type { App } from '../../src/api/app.js';
import { loadConfig } from '../../src/config/load.js';
import type { SluiceConfigInput } from '../../src/config/schema.js';
import type { InRecord, OutRecord } from '../../src/kafka/types.js';
import { createLogger } from '../../src/ops/logger.js';
import { createWorkerMetrics } from '../../src/ops/metrics.js';
import { openTaskState } from '../../src/runtime/restore.js';
import { Task, type TaskDeps } from '../../src/runtime/task.js';

/**
 * A real task of an app's first sub-topology (real operators, RocksDB state in a temporary folder,
 * empty changelogs) whose transactional producer is a fake that records what each checkpoint
 * would commit. No Kafka. With `written`, the fake answers with the offsets a broker would give
 * the changelog records (from 0 per partition), so that the local checkpoint's meta entry moves.
 */
export async function taskHarness(
  app: App,
  overrides: SluiceConfigInput = {},
  /** `recordLimits`: topics' max.message.bytes, as the worker reads them at start (KafkaClient.recordLimits). */
  opts: { written?: boolean; recordLimits?: Map<string, number> } = {},
) {
  const sub = app.topology().subtopologies[0]!;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-task-'));
  const config = loadConfig({
    overrides: { ...overrides, kafka: { brokers: ['127.0.0.1:1'] }, state: { ...overrides.state, dir } },
    env: {},
  });
  const commits: Array<Map<string, OutRecord[]>> = [];
  const ends = new Map<string, bigint>();
  const producer = {
    begin() {},
    async commitTransaction(records: Map<string, OutRecord[]>) {
      commits.push(records);
      const written = new Map<string, bigint>();
      if (opts.written)
        for (const [topic, list] of records)
          for (const r of list) {
            if (r.partition === undefined) continue;
            const tp = `${topic}:${r.partition}`;
            const at = ends.get(tp) ?? 0n;
            ends.set(tp, at + 1n);
            written.set(tp, at);
          }
      return written;
    },
    async close() {},
  };
  const client = {
    recordLimits: opts.recordLimits ?? new Map<string, number>(),
    transactionalProducer: async () => producer,
    admin: async () => ({
      committedOffsetsStable: async () => [],
      offsets: async () => [{ partition: 0, low: '0', high: '0' }],
    }),
    partitionReader: () => ({
      endOffsets: async () => ({ low: 0n, high: 0n }),
      read: async () => 0,
      close: async () => undefined,
    }),
  } as any;
  const logger = createLogger({ level: 'silent', format: 'json' });
  const metrics = createWorkerMetrics(new Registry());
  const deps: TaskDeps = {
    appId: app.id,
    groupId: app.id,
    config,
    client,
    logger,
    metrics,
    plainProducer: async () => {
      throw new Error('not at-least-once');
    },
    openState: (task) => openTaskState(task, { client, metrics, logger, config, appId: app.id }),
    seek: () => undefined,
    deadLetterTopic: `${app.id}-dlq`,
  };
  const task = new Task('0_0', sub, 0, deps);
  await task.init();
  let offset = 0;
  /** A JSON record for the next offset (the offsets of the harness's one input partition rise). */
  const rec = (
    key: string,
    value: unknown,
    timestamp: number,
    headers?: Record<string, string>,
  ): InRecord => {
    const r: InRecord = {
      key: Buffer.from(key),
      value: Buffer.from(JSON.stringify(value)),
      offset: String(offset++),
      timestamp: String(timestamp),
    };
    if (headers) (r as { headers?: unknown }).headers = headers;
    return r;
  };
  /** Checkpoints and returns what it committed, by topic (JSON values decoded). */
  const checkpoint = async () => {
    await task.checkpoint();
    const out = commits[commits.length - 1] ?? new Map<string, OutRecord[]>();
    return out;
  };
  const values = (out: Map<string, OutRecord[]>, topic: string) =>
    (out.get(topic) ?? []).map((r) => (r.value === null ? null : JSON.parse(r.value.toString())));
  return { task, rec, checkpoint, values, metrics, commits };
}
