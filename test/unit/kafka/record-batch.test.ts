import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { prng as rng } from '../../../examples/prng.js';
import { crc32c } from '../../../src/kafka/crc32c.js';
import { encodeProduceV3 } from '../../../src/kafka/produce-encoder.js';
import { appendTo, BatchBuilder, BUILDER_BYTES, recordCount } from '../../../src/kafka/record-batch.js';

const require = createRequire(import.meta.url);
const Long = require('kafkajs/src/utils/long.js');
const Decoder = require('kafkajs/src/protocol/decoder.js');
const decodeBatch = require('kafkajs/src/protocol/recordBatch/v0/decoder.js');

interface Rec {
  key: Buffer | string | null;
  value: Buffer | string | null;
  timestamp: number;
  headers?: Record<string, unknown>;
}

function records(seed: number, n: number, stamp: (i: number) => number): Rec[] {
  const r = rng(seed);
  return Array.from({ length: n }, (_, i) => {
    const rec: Rec = {
      key: r() < 0.1 ? null : r() < 0.5 ? `key-${i}` : Buffer.from(`k${i}`),
      value:
        r() < 0.05
          ? null
          : r() < 0.5
            ? Buffer.alloc(Math.floor(r() * 400), 66)
            : 'é'.repeat(Math.floor(r() * 200)),
      timestamp: stamp(i),
    };
    if (r() < 0.3)
      rec.headers = { 'sluice.error': 'boom', bin: Buffer.from([0, 1, 255]), multi: ['a', Buffer.from('b')] };
    return rec;
  });
}

const plain = (l: Rec[]) =>
  l.map((x) => ({ key: x.key, value: x.value, timestamp: String(x.timestamp), headers: x.headers }) as any);

function built(partition: number, l: Rec[]): BatchBuilder {
  const b = new BatchBuilder(partition);
  for (const x of l) b.append(x.key, x.value, x.timestamp, x.headers);
  return b;
}

function request(messages: unknown[]) {
  return encodeProduceV3({
    acks: -1,
    timeout: 30_000,
    transactionalId: 'app-w1',
    producerId: Long.fromString('1000000007'),
    producerEpoch: 3,
    compression: 0,
    topicData: [
      { topic: 'out', partitions: [{ partition: 2, firstSequence: 17, messages: messages as any }] },
    ],
  });
}

/** The request's one batch: where it starts in the request (after txId, acks, timeout, topic …). */
const BATCH_AT = 2 + 'app-w1'.length + 2 + 4 + 4 + 2 + 'out'.length + 4 + 4 + 4;

async function decoded(req: Buffer) {
  const batch = req.subarray(BATCH_AT);
  const length = batch.readInt32BE(8);
  // The batch's CRC covers its attributes onwards.
  assert.equal(batch.readUInt32BE(17), crc32c(batch.subarray(21, 12 + length)), 'the batch CRC is right');
  return await decodeBatch(new Decoder(batch));
}

test('one builder writes the same request as the plain records (timestamps in order)', () => {
  for (let round = 0; round < 20; round++) {
    const l = records(round, 1 + round * 37, (i) => 1_764_633_000_000 + i * 3);
    const b = built(2, l);
    assert.equal(b.count, l.length);
    assert.ok(request([{ key: null, value: null, batch: b }]).equals(request(plain(l))), `round ${round}`);
  }
});

test('several builders and plain records in one partition make one batch: the same bytes', () => {
  for (let round = 0; round < 20; round++) {
    const l = records(100 + round, 200, (i) => 1_764_633_000_000 + i * 5);
    const a = built(2, l.slice(0, 50));
    const c = built(2, l.slice(53, 140));
    const d = built(2, l.slice(140));
    const entries = [
      { key: null, value: null, batch: a },
      ...plain(l.slice(50, 53)),
      { key: null, value: null, batch: c },
      { key: null, value: null, batch: new BatchBuilder(2) }, // empty: left out
      { key: null, value: null, batch: d },
    ];
    assert.equal(recordCount(entries), 200);
    assert.ok(request(entries).equals(request(plain(l))), `round ${round}`);
  }
});

test('out-of-order timestamps: deltas from the first record, negative ones read back right', async () => {
  const r = rng(5);
  const l = records(9, 300, () => 1_764_633_000_000 + Math.floor(r() * 100_000) - 50_000);
  const a = built(2, l.slice(0, 120));
  const c = built(2, l.slice(120));
  const batch = await decoded(request([{ batch: a }, { batch: c }]));
  assert.equal(batch.records.length, l.length);
  assert.equal(batch.firstTimestamp, String(l[0]!.timestamp));
  assert.equal(batch.maxTimestamp, String(Math.max(...l.map((x) => x.timestamp))));
  batch.records.forEach((rec: any, i: number) => {
    const x = l[i]!;
    assert.equal(rec.offset, String(i));
    assert.equal(rec.timestamp, String(x.timestamp), `record ${i}: timestamp`);
    assert.deepEqual(rec.key, x.key === null ? null : Buffer.from(x.key));
    assert.deepEqual(rec.value, x.value === null ? null : Buffer.from(x.value));
    if (x.headers) assert.deepEqual(rec.headers.bin, Buffer.from([0, 1, 255]));
  });
});

test('pop takes the last record back: bytes, CRC, max and sizes as if it had never come', () => {
  const l = records(3, 80, (i) => 1_764_633_000_000 + ((i * 7919) % 1000));
  const b = built(1, l);
  for (let k = 0; k < 30; k++) b.pop();
  const fresh = built(1, l.slice(0, 50));
  assert.equal(b.count, 50);
  assert.ok(b.buf.subarray(0, b.len).equals(fresh.buf.subarray(0, fresh.len)));
  assert.equal(b.crc, fresh.crc);
  assert.equal(b.crc, crc32c(fresh.buf.subarray(0, fresh.len)));
  assert.equal(b.max, fresh.max);
  assert.equal(b.keyValueBytes, fresh.keyValueBytes);
  // And it goes on from there as the fresh one does.
  for (const x of l.slice(50, 60)) {
    b.append(x.key, x.value, x.timestamp, x.headers);
    fresh.append(x.key, x.value, x.timestamp, x.headers);
  }
  assert.ok(request([{ batch: b }]).equals(request([{ batch: fresh }])));
});

test('appendTo fills the last builder, and starts a new one past the bound (the next send)', () => {
  const list: any[] = [];
  const value = Buffer.alloc(10_000, 1);
  for (let i = 0; i < 120; i++)
    appendTo(list, list[list.length - 1]?.batch, 5, Buffer.from(`k${i}`), value, 1000 + i);
  assert.equal(recordCount(list), 120);
  assert.ok(list.length >= 2, 'split');
  for (const e of list) {
    assert.equal(e.partition, 5);
    assert.equal(e.batch.partition, 5);
    assert.ok(e.batch.len < BUILDER_BYTES + 10_100, 'each near the bound at most');
  }
  // In order: the second builder's first record follows the first builder's last.
  assert.equal(list[1].batch.first, list[0].batch.stamps[list[0].batch.count - 1] + 1);
});
