import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { createKeyPartitioner, murmur2, partitionForKey } from '../../../src/kafka/partitioner.js';

const require = createRequire(import.meta.url);
const kafkajsMurmur2 = require('kafkajs/src/producer/partitioners/default/murmur2.js') as (
  k: Buffer,
) => number;

test('murmur2 should match the Java client on known vectors', () => {
  // Values from Kafka's UtilsTest.testMurmur2 (org.apache.kafka.common.utils).
  const cases: Array<[string, number]> = [
    ['21', -973932308],
    ['foobar', -790332482],
    ['a-little-bit-long-string', -985981536],
    ['a-little-bit-longer-string', -1486304829],
    ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
    ['abc', 479470107],
  ];
  for (const [s, h] of cases) assert.equal(murmur2(Buffer.from(s)), h, s);
});

test('partitionForKey should agree with kafkajs DefaultPartitioner for random keys', () => {
  for (let i = 0; i < 2000; i++) {
    const key = randomBytes(i % 37);
    const expected = (kafkajsMurmur2(key) & 0x7fffffff) % 12;
    assert.equal(partitionForKey(key, 12), expected);
  }
});

test("the producers' partitioner should pick what kafkajs's DefaultPartitioner picks", () => {
  const { Partitioners } = require('kafkajs') as {
    Partitioners: { DefaultPartitioner: () => (a: unknown) => number };
  };
  const theirs = Partitioners.DefaultPartitioner();
  const ours = createKeyPartitioner()();
  const partitionMetadata = Array.from({ length: 7 }, (_, i) => ({
    partitionId: i,
    leader: i === 3 ? -1 : 1,
  }));
  for (let i = 0; i < 2000; i++) {
    const key = i % 3 === 0 ? `user-${i}` : randomBytes(i % 41);
    const message = { key, value: null };
    const args = { topic: 't', partitionMetadata, message };
    assert.equal(ours(args), theirs(args), String(key));
    const given = { topic: 't', partitionMetadata, message: { ...message, partition: i % 7 } };
    assert.equal(ours(given), i % 7);
  }
  // No key: round robin over the partitions with a leader (3 has none).
  const seen = new Set<number>();
  for (let i = 0; i < 12; i++) seen.add(ours({ topic: 'u', partitionMetadata, message: { key: null } }));
  assert.deepEqual([...seen].sort(), [0, 1, 2, 4, 5, 6]);
});
