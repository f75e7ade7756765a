import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KafkaAdmin } from '../../../src/kafka/admin.js';
import type { TopicPartitionOffset } from '../../../src/kafka/types.js';
import { createLogger } from '../../../src/ops/logger.js';
import { RepartitionPurge } from '../../../src/runtime/repartition-purge.js';

const logger = createLogger({ level: 'silent', format: 'json' });

/** An admin that answers committed offsets from `committed` and records the deletes asked of it. */
function world(committed: TopicPartitionOffset[], failDeleteOf = new Set<string>()) {
  const deletes: Array<{ topic: string; partitions: Array<{ partition: number; offset: string }> }> = [];
  let failures = 0;
  const admin = {
    committedOffsets: async () => committed,
    deleteRecordsBefore: async (topic: string, partitions: Array<{ partition: number; offset: string }>) => {
      if (failDeleteOf.has(topic)) throw new Error(`no Delete permission on ${topic}`);
      deletes.push({ topic, partitions: [...partitions] });
    },
  } as unknown as KafkaAdmin;
  // Tasks: sub-topology 1 reads `r` (a repartition topic) and `in`; this worker has partitions 0 and 2.
  const tasks = [0, 2].map((partition) => ({ sub: { sourceTopics: ['r', 'in', 'r2'] }, partition }));
  const purge = new RepartitionPurge({
    groupId: 'g',
    intervalMs: 1000,
    admin: async () => admin,
    topics: new Set(['r', 'r2']),
    tasks: () => tasks,
    logger,
    failed: () => failures++,
  });
  return { purge, deletes, failures: () => failures };
}

const at = (topic: string, partition: number, offset: string) => ({
  topic,
  partition,
  offset,
  metadata: null,
});

test('the repartition purge should delete only its own partitions of repartition topics, before committed offsets, once per offset', async () => {
  const committed = [
    at('r', 0, '120'),
    at('r', 1, '500'), // another worker's partition
    at('r', 2, '-1'), // nothing committed: -1 would mean "up to the end" to DeleteRecords
    at('r2', 0, '0'), // nothing to delete
    at('r2', 2, '7'),
    at('in', 0, '900'), // the user's input topic: never
  ];
  const w = world(committed);
  await w.purge.purge();
  assert.deepEqual(w.deletes, [
    { topic: 'r', partitions: [{ partition: 0, offset: '120' }] },
    { topic: 'r2', partitions: [{ partition: 2, offset: '7' }] },
  ]);
  await w.purge.purge();
  assert.equal(w.deletes.length, 2, 'unchanged offsets are not sent again');
  committed[0] = at('r', 0, '130');
  await w.purge.purge();
  assert.deepEqual(w.deletes[2], { topic: 'r', partitions: [{ partition: 0, offset: '130' }] });
  assert.equal(w.failures(), 0);
});

test('the repartition purge should count a failed delete, go on with the other topics, and retry it next round', async () => {
  const w = world([at('r', 0, '10'), at('r2', 0, '20')], new Set(['r']));
  await w.purge.purge();
  assert.equal(w.failures(), 1);
  assert.deepEqual(w.deletes, [{ topic: 'r2', partitions: [{ partition: 0, offset: '20' }] }]);
  await w.purge.purge();
  assert.equal(w.failures(), 2, 'the failed topic is tried again');
});
