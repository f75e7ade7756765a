import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { prng as rng } from '../../../examples/prng.js';
import { assertKafkajsPatched, kafkajsPatchStatus } from '../../../src/kafka/kafkajs-preload.js';
import { encodeProduceV3, produceEncoderPatched } from '../../../src/kafka/produce-encoder.js';

const require = createRequire(import.meta.url);
const v3 = require('kafkajs/src/protocol/requests/produce/v3/request.js');
const Long = require('kafkajs/src/utils/long.js');

/** kafkajs's own encoding of the same request, with the clock held still for both. */
async function both(args: any): Promise<[Buffer, Buffer]> {
  const now = Date.now;
  Date.now = () => 1_764_633_600_000;
  try {
    const theirs = (await v3.original(args).encode()).buffer as Buffer;
    const ours = encodeProduceV3(args);
    const viaModule = (await v3(args).encode()).buffer as Buffer;
    assert.deepEqual(viaModule, ours, 'the installed request encodes with the new encoder');
    return [theirs, ours];
  } finally {
    Date.now = now;
  }
}

test('the produce encoder is installed before kafkajs loads its producer', () => {
  assert.equal(produceEncoderPatched, true);
  assert.equal(v3.sluicePatched, true);
  assert.equal(kafkajsPatchStatus().patches['produce request encoder (produce-encoder.ts)'], true);
  assertKafkajsPatched();
});

test('it writes the same bytes as kafkajs, for keys, values and headers of every kind', async () => {
  const r = rng(7);
  const value = (n: number) => (r() < 0.5 ? Buffer.alloc(n, 65 + (n % 26)) : 'é'.repeat(n));
  for (let round = 0; round < 30; round++) {
    const topicData = Array.from({ length: 1 + (round % 3) }, (_, t) => ({
      topic: `topic-${t}-ü`,
      partitions: Array.from({ length: 1 + (round % 4) }, (_, p) => ({
        partition: p * 3,
        firstSequence: round * 11 + p,
        messages: Array.from({ length: 1 + Math.floor(r() * 300) }, (_, i) => {
          const m: any = {
            key: r() < 0.1 ? null : r() < 0.5 ? `key-${i}` : Buffer.from(`k${i}`),
            value: r() < 0.05 ? null : value(Math.floor(r() * 400)),
            // Same digit count, as kafkajs's string sort needs to find first and max.
            timestamp: r() < 0.1 ? undefined : String(1_764_633_000_000 + Math.floor(r() * 2_000_000)),
          };
          if (r() < 0.4)
            m.headers = {
              'sluice.error': 'boom',
              bin: Buffer.from([0, 1, 2, 255]),
              multi: ['a', Buffer.from('b'), 'ç'.repeat(200)],
            };
          return m;
        }),
      })),
    }));
    const args = {
      acks: -1,
      timeout: 30_000,
      transactionalId: round % 2 === 0 ? null : `app-0_${round}`,
      producerId: round % 2 === 0 ? Long.fromInt(-1) : Long.fromString(`${1_000_000_007 * (round + 1)}`),
      producerEpoch: round % 5,
      compression: 0,
      topicData,
    };
    const [theirs, ours] = await both(args);
    assert.equal(ours.length, theirs.length, `round ${round}: length`);
    assert.ok(ours.equals(theirs), `round ${round}: bytes differ`);
  }
});

/** A request of one topic 't' with one partition (0) holding these messages. */
const onePartition = (messages: Array<Record<string, string>>) => ({
  acks: 1,
  timeout: 1000,
  topicData: [{ topic: 't', partitions: [{ partition: 0, messages }] }],
});

test('the first and max timestamps are numeric (kafkajs sorts them as strings)', async () => {
  const ours = encodeProduceV3(
    onePartition([
      { key: 'a', value: 'x', timestamp: '999' },
      { key: 'b', value: 'y', timestamp: '1000' },
    ]),
  );
  // Request header: txId (2), acks (2), timeout (4), topics (4), topic 't' (3), partitions (4),
  // partition (4), batch size (4); then the batch: first timestamp at 27, max at 35.
  const batch = 2 + 2 + 4 + 4 + 3 + 4 + 4 + 4;
  assert.equal(ours.readBigInt64BE(batch + 27), 999n);
  assert.equal(ours.readBigInt64BE(batch + 35), 1000n);
});

test('a compressed batch keeps kafkajs encoding', async () => {
  const args = {
    acks: -1,
    timeout: 1000,
    compression: 1,
    topicData: [
      { topic: 't', partitions: [{ partition: 0, messages: [{ key: 'a', value: 'x'.repeat(100) }] }] },
    ],
  };
  const req = v3(args);
  const buf = (await req.encode()).buffer as Buffer;
  assert.ok(buf.length > 0);
  assert.equal(req.apiVersion, 3);
});

test('a timestamp that is not a whole number of ms is sent as the send time, not thrown on', () => {
  const args = onePartition([
    { key: 'a', value: 'x', timestamp: '1000' },
    { key: 'b', value: 'y', timestamp: '1.5' },
    { key: 'c', value: 'z', timestamp: 'NaN' },
    { key: 'd', value: 'w', timestamp: String(2 ** 63) },
  ]);
  const now = Date.now;
  Date.now = () => 5000;
  try {
    const ours = encodeProduceV3(args);
    const batch = 2 + 2 + 4 + 4 + 3 + 4 + 4 + 4;
    assert.equal(ours.readBigInt64BE(batch + 27), 1000n, 'first: the one valid timestamp');
    assert.equal(ours.readBigInt64BE(batch + 35), 1000n, 'max: the others do not count');
  } finally {
    Date.now = now;
  }
});
