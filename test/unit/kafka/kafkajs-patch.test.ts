import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { KafkaClient } from '../../../src/kafka/client.js';
import { groupMessagesPerPartition, kafkajsGroupingPatched } from '../../../src/kafka/kafkajs-patch.js';

const require = createRequire(import.meta.url);

/** kafkajs 2.2.4's own algorithm (quadratic), as the reference for the grouping. */
function reference({ topic, partitionMetadata, messages, partitioner }: any): Record<number, unknown[]> {
  if (partitionMetadata.length === 0) return {};
  return messages.reduce((result: any, message: unknown) => {
    const partition = partitioner({ topic, partitionMetadata, message });
    const current = result[partition] || [];
    return Object.assign(result, { [partition]: [...current, message] });
  }, {});
}

test('groupMessagesPerPartition should group like kafkajs, keeping the input order per partition', () => {
  const messages = Array.from({ length: 1000 }, (_, i) => ({
    key: `k${(i * 7919) % 97}`,
    value: `v${i}`,
    n: i,
  }));
  const args = {
    topic: 't',
    partitionMetadata: [{}, {}, {}, {}, {}],
    messages,
    partitioner: ({ message }: any) => (message.n * 31) % 5,
  };
  const got = groupMessagesPerPartition(args);
  assert.deepEqual(got, reference(args));
  assert.deepEqual(Object.keys(got), ['0', '1', '2', '3', '4']);
  assert.ok(got[3]!.every((m: any, i, l: any[]) => i === 0 || l[i - 1].n < m.n));
  assert.deepEqual(groupMessagesPerPartition({ ...args, partitionMetadata: [] }), {});
});

test('kafkajs-patch should be in effect for the producers KafkaClient makes', () => {
  assert.ok(KafkaClient);
  assert.equal(kafkajsGroupingPatched, true);
  const mod = require.cache[require.resolve('kafkajs/src/producer/groupMessagesPerPartition.js')];
  assert.equal(mod?.exports, groupMessagesPerPartition);
});
