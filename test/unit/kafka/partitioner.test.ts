import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { murmur2, partitionForKey } from '../../../src/kafka/partitioner.js';

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
