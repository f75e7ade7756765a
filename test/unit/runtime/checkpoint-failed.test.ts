import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import type { TopicRecords } from '../../../src/kafka/producer.js';
import type { TopicPartitionOffset } from '../../../src/kafka/types.js';
import { createLogger } from '../../../src/ops/logger.js';
import { createWorkerMetrics } from '../../../src/ops/metrics.js';
import { type CheckpointDeps, writeCheckpoint } from '../../../src/runtime/checkpoint.js';
import { TaskProgress } from '../../../src/runtime/task-progress.js';

/**
 * A checkpoint that failed took its outputs with it (its snapshot drained the collector): a later
 * checkpoint of the same run would commit offsets past records whose outputs never committed.
 * The task manager resets a task after a failed checkpoint, but a stopping worker (or a revoked
 * task under exactly-once v1) closes it with one more checkpoint instead (found by a review).
 */
test('after a failed checkpoint none of the same run commits; after a reset the next one does', async () => {
  const commits: Array<{ outputs: string[]; offsets: string[] }> = [];
  let fail = true;
  const producer = {
    begin() {},
    async commitTransaction(records: TopicRecords, o: { offsets: readonly TopicPartitionOffset[] }) {
      commits.push({
        outputs: (records.get('out') ?? []).map((r) => String(r.value)),
        offsets: o.offsets.map((x) => `${x.topic}@${x.offset}`),
      });
      if (fail) throw new Error('transaction failed');
      return new Map();
    },
    async close() {},
  };
  const d: CheckpointDeps = {
    appId: 'a',
    taskId: '0_0',
    groupId: 'a',
    partition: 0,
    eos: true,
    logger: createLogger({ level: 'silent', format: 'json' }),
    metrics: createWorkerMetrics(new Registry()),
    deadLetterTopic: 'a-dlq',
    overflowTopic: 'a-overflow',
    plainProducer: async () => {
      throw new Error('not at-least-once');
    },
    commitOffsets: async () => undefined,
    sharedTransaction: true,
  };
  const progress = new TaskProgress({ maxOutOfOrdernessMs: 0, idleTimeoutMs: 0, idleAdvanceMs: 0 });
  const processed = (value: string, next: bigint) => {
    progress.collector.emit('out', Buffer.from('k'), Buffer.from(value), 1, undefined);
    progress.toCommit.set('in', next);
    progress.next.set('in', next);
    progress.dirtyRecords++;
  };
  processed('v1', 1n);
  await assert.rejects(
    writeCheckpoint(d, progress, () => undefined, producer),
    /transaction failed/,
  );
  processed('v2', 2n);
  fail = false;
  await assert.rejects(
    writeCheckpoint(d, progress, () => undefined, producer),
    /a checkpoint failed since its last reset/,
    'v1 never committed: offset 2 must not',
  );
  assert.equal(commits.length, 1, 'nothing more reached the producer');
  progress.clear(); // the reset: back to the last checkpoint, the records read again
  processed('v1', 1n);
  processed('v2', 2n);
  await writeCheckpoint(d, progress, () => undefined, producer);
  assert.deepEqual(commits[1], { outputs: ['v1', 'v2'], offsets: ['in@2'] });
});
