import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { prng as rng } from '../../../examples/prng.js';
import {
  batchFilterPatched,
  decodeBatchAt,
  fetchDecoderPatched,
  withinOffset,
} from '../../../src/kafka/fetch-decoder.js';
import { assertKafkajsPatched, kafkajsPatchStatus } from '../../../src/kafka/kafkajs-preload.js';

const require = createRequire(import.meta.url);
const decoder = require('kafkajs/src/protocol/recordBatch/v0/decoder.js');
const decodeMessages = require('kafkajs/src/protocol/requests/fetch/v4/decodeMessages.js');
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0/index.js');
const Record = require('kafkajs/src/protocol/recordBatch/record/v0/index.js');
const Decoder = require('kafkajs/src/protocol/decoder.js');
const Encoder = require('kafkajs/src/protocol/encoder.js');
const Long = require('kafkajs/src/utils/long.js');
const Batch = require('kafkajs/src/consumer/batch.js');
const { Types } = require('kafkajs/src/protocol/message/compression/index.js');

interface BatchSpec {
  firstOffset: number | string;
  firstTimestamp: number | string;
  compression?: number;
  transactional?: boolean;
  producerId?: number;
  records: Array<{ offsetDelta: number; timestampDelta: number; key: any; value: any; headers?: any }>;
}

/** One batch's bytes from kafkajs's own encoder; `attributes` ORed in afterwards (no CRC check). */
async function batchBytes(s: BatchSpec, orAttributes = 0): Promise<Buffer> {
  const records = s.records.map((r) => Record({ ...r, timestampDelta: Long.fromValue(r.timestampDelta) }));
  const enc = await RecordBatch({
    compression: s.compression ?? Types.None,
    firstOffset: Long.fromValue(s.firstOffset),
    firstTimestamp: s.firstTimestamp,
    maxTimestamp: Number(s.firstTimestamp) + 5,
    lastOffsetDelta: s.records.length === 0 ? 0 : s.records[s.records.length - 1]!.offsetDelta,
    transactional: s.transactional ?? false,
    producerId: Long.fromValue(s.producerId ?? -1),
    producerEpoch: 3,
    firstSequence: 17,
    records,
  });
  const b = Buffer.from(enc.buffer as Buffer);
  if (orAttributes !== 0) b.writeInt16BE(b.readInt16BE(21) | orAttributes, 21);
  return b;
}

/** Every batch of `bytes` through a decoder, the way kafkajs's decodeMessages walks them. */
async function decodeAll(bytes: Buffer, dec: (d: unknown) => Promise<any>): Promise<any[]> {
  const d = new Decoder(bytes);
  const out: any[] = [];
  while (d.canReadBytes(49)) {
    try {
      out.push(await dec(d));
    } catch (e) {
      if ((e as Error).name === 'KafkaJSPartialMessageError') break;
      throw e;
    }
  }
  return out;
}

async function same(bytes: Buffer): Promise<any[]> {
  const theirs = await decodeAll(bytes, decoder.original);
  const ours = await decodeAll(bytes, decoder);
  assert.deepEqual(ours, theirs);
  // decodeMessages (a Fetch response's records field) takes the installed decoder too.
  const e = new Encoder().writeInt32(bytes.length).writeBuffer(bytes);
  const viaFetch = await decodeMessages(new Decoder(e.buffer));
  assert.deepEqual(
    viaFetch,
    theirs.flatMap((b) => b.records),
  );
  return ours;
}

function randomBatch(r: () => number, firstOffset: number | string, n: number): BatchSpec {
  const value = (len: number) =>
    r() < 0.5 ? Buffer.alloc(len, 65 + (len % 26)) : Buffer.from('é'.repeat(len));
  return {
    firstOffset,
    firstTimestamp: r() < 0.1 ? -1 : 1_764_633_000_000 + Math.floor(r() * 2_000_000),
    transactional: r() < 0.5,
    producerId: r() < 0.5 ? -1 : Math.floor(r() * 1e6),
    records: Array.from({ length: n }, (_, i) => ({
      offsetDelta: i,
      timestampDelta: r() < 0.2 ? -Math.floor(r() * 1e9) : Math.floor(r() * 1e12),
      key: r() < 0.1 ? null : Buffer.from(`key-${i}-ü`),
      value: r() < 0.05 ? null : value(Math.floor(r() * 400)),
      headers:
        r() < 0.4
          ? { 'sluice.error': 'boom', 'ü-key': Buffer.from([0, 1, 2]), many: ['a', 'b', 'c'], '7': 'x' }
          : undefined,
    })),
  };
}

test('the fetch decoder and the Batch filter are installed before kafkajs loads its consumer', () => {
  assert.equal(fetchDecoderPatched, true);
  assert.equal(batchFilterPatched, true);
  assert.equal(decoder.sluicePatched, true);
  assert.equal(Batch.sluicePatched, true);
  const p = kafkajsPatchStatus().patches;
  assert.equal(p['record batch decoder (fetch-decoder.ts)'], true);
  assert.equal(p['consumer batch offset filter (fetch-decoder.ts)'], true);
  assertKafkajsPatched();
});

test('it decodes the same records as kafkajs, for keys, values, headers and timestamps of every kind', async () => {
  const r = rng(11);
  for (let round = 0; round < 40; round++) {
    const parts: Buffer[] = [];
    let offset = round * 1_000_003;
    for (let b = 0; b < 1 + (round % 4); b++) {
      const n = Math.floor(r() * 200);
      parts.push(await batchBytes(randomBatch(r, offset, n)));
      offset += n;
    }
    const bytes = Buffer.concat(parts);
    for (const [i, b] of (await same(bytes)).entries())
      assert.equal(
        decodeBatchAt(parts[i]!, 0)?.batch.records.length,
        b.records.length,
        `batch ${i} of round ${round} took the fast path`,
      );
  }
});

test('control batches, transactional and log-append-time batches keep kafkajs fields', async () => {
  const r = rng(3);
  const abortKey = Buffer.from([0, 0, 0, 0]);
  const commitKey = Buffer.from([0, 0, 0, 1]);
  const marker = (k: Buffer, offset: number): BatchSpec => ({
    firstOffset: offset,
    firstTimestamp: 1_764_633_000_000,
    transactional: true,
    producerId: 42,
    records: [{ offsetDelta: 0, timestampDelta: 0, key: k, value: Buffer.from([0, 0, 0, 0, 0, 0]) }],
  });
  const bytes = Buffer.concat([
    await batchBytes({ ...randomBatch(r, 100, 5), transactional: true, producerId: 42 }),
    await batchBytes(marker(abortKey, 105), 0x20),
    await batchBytes(marker(commitKey, 106), 0x20),
    await batchBytes(randomBatch(r, 107, 9), 0x08),
  ]);
  const got = await same(bytes);
  assert.equal(got[1].isControlBatch, true);
  assert.equal(got[1].records[0].isControlRecord, true);
  assert.equal(got[3].records[2].timestamp, got[3].maxTimestamp);
});

test('compressed batches, offsets beyond 2^53 and a partial last batch go to kafkajs and decode the same', async () => {
  const r = rng(5);
  const gzip = await batchBytes({ ...randomBatch(r, 500, 30), compression: Types.GZIP });
  const huge = await batchBytes(randomBatch(r, '9007199254740000', 20));
  const plain = await batchBytes(randomBatch(r, 530, 30));
  assert.equal(decodeBatchAt(gzip, 0), undefined);
  assert.equal(decodeBatchAt(huge, 0), undefined);
  const got = await same(Buffer.concat([gzip, plain, huge, plain.subarray(0, plain.length - 7)]));
  assert.equal(got.length, 3, 'the partial batch ends the walk as in kafkajs');
  assert.equal(got[2].records[19].offset, '9007199254740019');
  // Header names that an object's prototype has: kafkajs's fold sees the inherited one; so must we.
  const named = (headers: any, offset: number): BatchSpec => ({
    firstOffset: offset,
    firstTimestamp: 1_764_633_000_000,
    records: [{ offsetDelta: 0, timestampDelta: 0, key: null, value: Buffer.from('v'), headers }],
  });
  const inherited = await batchBytes(named({ toString: 'y', constructor: 'z' }, 600));
  const proto = await batchBytes(named({ ['__proto__']: 'x' }, 601));
  assert.notEqual(decodeBatchAt(inherited, 0), undefined);
  assert.equal(decodeBatchAt(proto, 0), undefined);
  await same(Buffer.concat([inherited, proto]));
  // A magic byte other than 2 goes to kafkajs too.
  const legacy = Buffer.from(plain);
  legacy.writeInt8(1, 16);
  assert.equal(decodeBatchAt(legacy, 0), undefined);
  // A batch whose header says it is longer than its records is left to kafkajs.
  const cut = Buffer.from(plain);
  cut.writeInt32BE(cut.readInt32BE(57) + 1, 57);
  assert.equal(decodeBatchAt(cut, 0), undefined);
});

test('the Batch keeps kafkajs fields: offset filter, aborted transactions, control records', async () => {
  const Original = Object.getPrototypeOf(Batch);
  const r = rng(9);
  const bytes = Buffer.concat([
    await batchBytes({ ...randomBatch(r, 995, 10), transactional: true, producerId: 7 }),
    await batchBytes(
      {
        firstOffset: 1005,
        firstTimestamp: 1,
        transactional: true,
        producerId: 7,
        records: [{ offsetDelta: 0, timestampDelta: 0, key: Buffer.from([0, 0, 0, 0]), value: null }],
      },
      0x20,
    ),
    await batchBytes(randomBatch(r, 1006, 10)),
  ]);
  const e = new Encoder().writeInt32(bytes.length).writeBuffer(bytes);
  const messages = await decodeMessages(new Decoder(e.buffer));
  for (const fetched of ['990', '998', '1006', '2000']) {
    for (const abortedTransactions of [[], [{ producerId: '7', firstOffset: '995' }]]) {
      const pd = { partition: 2, highWatermark: '1016', messages, abortedTransactions };
      const ours = new Batch('t', fetched, pd);
      const theirs = new Original('t', fetched, pd);
      assert.deepEqual({ ...ours }, { ...theirs });
      assert.equal(ours.offsetLag(), theirs.offsetLag());
      assert.equal(ours.lastOffset(), theirs.lastOffset());
      assert.equal(ours.isEmptyControlRecord(), theirs.isEmptyControlRecord());
    }
  }
  const m = (o: string) => ({ offset: o });
  assert.deepEqual(withinOffset([m('5'), m('3'), m('7')], '5'), [m('5'), m('7')]);
  assert.deepEqual(withinOffset([m('9007199254740993')], '9007199254740992'), [m('9007199254740993')]);
  assert.deepEqual(withinOffset([m('9007199254740992')], '9007199254740993'), []);
});
