/**
 * Replaces kafkajs 2.2.4's Produce request v3 encoder (`protocol/requests/produce/v3/request.js`,
 * which v4–v7 wrap), for uncompressed record batches. kafkajs builds each record in an `Encoder`
 * of its own (a buffer grown by doubling, then copied into the batch, the batch into the
 * partition, the partition into the request), computes every varlong through 64-bit `Long`
 * objects, and sorts the batch's timestamps as strings to find its first and last. A checkpoint
 * sends all its outputs and changelog records in one request, so this was the largest cost of a
 * worker after the garbage it made (bench/profile.ts, keyed count: the produce encoding about
 * 17 % of busy CPU, with `FastBuffer`/`_copyActual` from the regrowing buffers on top).
 *
 * This encoder measures the whole request first, then writes it into one buffer: the same bytes
 * as kafkajs's (test/unit/kafka/produce-encoder.test.ts compares them), except that the batch's
 * first and max timestamps are the numeric minimum and maximum (kafkajs's string sort gets them
 * wrong when timestamps differ in digit count). Compressed batches keep kafkajs's encoder.
 *
 * Like the grouping patch (kafkajs-patch.ts) it is installed before kafkajs loads its producer
 * (kafkajs-preload.ts); {@link produceEncoderPatched} says whether that worked.
 */
import { createRequire } from 'node:module';
import { crc32c, crc32cCombine, crc32cUpdate } from './crc32c.js';
import { BATCH_HEADER, type BatchBuilder, lengthOf, measureBody, sizeOfVarInt } from './record-batch.js';

const require = createRequire(import.meta.url);

interface Message {
  key?: Buffer | string | null;
  value?: Buffer | string | null;
  timestamp?: string | number | null;
  headers?: Record<string, unknown>;
  /** Records written ahead by the collector (record-batch.ts); the entry has no record of its own. */
  batch?: BatchBuilder;
}
interface PartitionData {
  partition: number;
  firstSequence?: number;
  messages: Message[];
}
interface TopicData {
  topic: string;
  partitions: PartitionData[];
}
interface RequestArgs {
  acks: number;
  timeout: number;
  transactionalId?: string | null;
  producerId?: { value: bigint } | number | string;
  producerEpoch?: number;
  compression?: number;
  topicData: TopicData[];
}
interface EncoderLike {
  buf: Buffer;
  offset: number;
}

const MAGIC = 2;
const TRANSACTIONAL = 16;

class Writer {
  o = 0;
  constructor(readonly b: Buffer) {}
  varInt(v: number): void {
    let z = ((v << 1) ^ (v >> 31)) >>> 0;
    const b = this.b;
    while (z >= 0x80) {
      b[this.o++] = (z & 0x7f) | 0x80;
      z >>>= 7;
    }
    b[this.o++] = z;
  }
  varLong(v: number): void {
    let z = v >= 0 ? v * 2 : -v * 2 - 1;
    const b = this.b;
    while (z >= 0x80) {
      b[this.o++] = (z % 0x80) | 0x80;
      z = Math.floor(z / 0x80);
    }
    b[this.o++] = z;
  }
  /** A varint length and the bytes (`len` from {@link lengthOf}). */
  bytes(v: unknown, len: number): void {
    this.varInt(len);
    if (len <= 0) return;
    if (Buffer.isBuffer(v)) {
      // TypedArray#set: the same bytes as Buffer#copy, without its argument handling (small records).
      this.b.set(v, this.o);
      this.o += len;
    } else this.o += this.b.write(String(v), this.o, len, 'utf8');
  }
  string16(s: string | null): void {
    if (s === null) {
      this.b.writeInt16BE(-1, this.o);
      this.o += 2;
      return;
    }
    const len = Buffer.byteLength(s, 'utf8');
    this.b.writeInt16BE(len, this.o);
    this.o += 2;
    this.o += this.b.write(s, this.o, len, 'utf8');
  }
}

/** What one record needs, measured once. */
interface Measured {
  m: Message;
  keyLen: number;
  valueLen: number;
  headers: Array<[string, unknown]> | undefined;
  headerLens: number[] | undefined;
  delta: number;
  body: number;
}

/** One entry of a partition that holds records written ahead: a builder's, or a plain message. */
type Part =
  | { batch: BatchBuilder; index: number; size: number }
  | { batch?: undefined; index: number; rec: Measured };

interface MeasuredPartition {
  /** Plain messages only: each measured (the batch's base is their minimum timestamp, as kafkajs). */
  recs: Measured[];
  /** With records written ahead: the entries in order (the base is the first record's timestamp). */
  parts?: Part[];
  count: number;
  first: number;
  max: number;
  size: number;
}

/**
 * A record's own timestamp, or NaN when it has none that a batch can hold: missing or empty
 * (kafkajs's "send time"), or not a whole number of ms (NaN, 1.5, Infinity: the batch's int64
 * fields cannot hold it).
 */
function ownStamp(raw: Message['timestamp']): number {
  const n = raw === null || raw === undefined || raw === '' ? Number.NaN : Number(raw);
  return Number.isSafeInteger(n) ? n : Number.NaN;
}

/** kafkajs's rule for a record's timestamp, `(timestamp || now)`; one without its own is now. */
function stampOf(raw: Message['timestamp'], now: number): number {
  const t = ownStamp(raw);
  return raw === 0 || Number.isNaN(t) ? now : t;
}

function measureRecord(m: Message, delta: number, index: number): Measured {
  return { m, delta, ...measureBody(m.key, m.value, m.headers, delta, index) };
}

/**
 * A partition with records written ahead (batch entries of the collector's builders): one batch
 * of all its entries in order, based on the first record's timestamp (negative deltas for older
 * records after it, as the Java producer writes them). The first builder is copied as it is when
 * it comes first; the others' records get their offset and timestamp deltas rewritten.
 */
function measureWithBatches(msgs: Message[], now: number): MeasuredPartition {
  let base: number | undefined;
  let max = Number.NEGATIVE_INFINITY;
  let count = 0;
  const stamps: number[] = [];
  for (const m of msgs) {
    const b = m.batch;
    if (b !== undefined) {
      if (b.count === 0) continue;
      base ??= b.first;
      if (b.max > max) max = b.max;
    } else {
      const t = stampOf(m.timestamp, now);
      stamps.push(t);
      base ??= t;
      if (t > max) max = t;
    }
  }
  base ??= now;
  if (max === Number.NEGATIVE_INFINITY) max = base;
  const parts: Part[] = [];
  let size = BATCH_HEADER;
  let plain = 0;
  for (const m of msgs) {
    const b = m.batch;
    if (b !== undefined) {
      if (b.count === 0) continue;
      const bytes = b.sizeRebased(base, count);
      parts.push({ batch: b, index: count, size: bytes });
      size += bytes;
      count += b.count;
    } else {
      const rec = measureRecord(m, stamps[plain++]! - base, count);
      parts.push({ index: count, rec });
      size += sizeOfVarInt(rec.body) + rec.body;
      count++;
    }
  }
  return { recs: [], parts, count, first: base, max, size };
}

function measurePartition(p: PartitionData, now: number): MeasuredPartition {
  const msgs = p.messages;
  for (let i = 0; i < msgs.length; i++)
    if (msgs[i]!.batch !== undefined) return measureWithBatches(msgs, now);
  let first = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  const ts = new Array<number>(msgs.length);
  for (let i = 0; i < msgs.length; i++) {
    const raw = msgs[i]!.timestamp;
    // kafkajs: a missing (or empty) timestamp is the send time, and does not count for first/max;
    // nor does one that is not a whole number of ms (it would make the batch's int64 fields throw).
    const t = ownStamp(raw);
    ts[i] = t;
    if (t < first) first = t;
    if (t > max) max = t;
  }
  if (first === Number.POSITIVE_INFINITY) first = max = now;
  const recs = new Array<Measured>(msgs.length);
  let size = BATCH_HEADER;
  for (let i = 0; i < msgs.length; i++) {
    const raw = msgs[i]!.timestamp;
    // As kafkajs: `(timestamp || now) - first`, so a missing, empty or numeric-0 one is now.
    const delta = (raw === 0 || Number.isNaN(ts[i]!) ? now : ts[i]!) - first;
    const r = measureRecord(msgs[i]!, delta, i);
    recs[i] = r;
    size += sizeOfVarInt(r.body) + r.body;
  }
  return { recs, count: recs.length, first, max, size };
}

function writeRecord(w: Writer, r: Measured, index: number): void {
  const b = w.b;
  w.varInt(r.body);
  b[w.o++] = 0; // attributes
  w.varLong(r.delta);
  w.varInt(index);
  w.bytes(r.m.key, r.keyLen);
  w.bytes(r.m.value, r.valueLen);
  if (r.headers === undefined) w.varInt(0);
  else {
    w.varInt(r.headers.length);
    for (let h = 0; h < r.headers.length; h++) {
      const [k, v] = r.headers[h]!;
      w.bytes(k, Buffer.byteLength(k, 'utf8'));
      w.bytes(v, r.headerLens![h]!);
    }
  }
}

/** Writes a partition's entries after its batch header (at `start`); returns the batch's CRC. */
function writeParts(w: Writer, parts: Part[], base: number, start: number): number {
  const b = w.b;
  // The CRC covers the header from its attributes on, then the records.
  let state = crc32cUpdate(-1, b, start + 21, start + BATCH_HEADER);
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const from = w.o;
    if (part.batch !== undefined) {
      const bb = part.batch;
      w.o = bb.writeRebased(b, w.o, base, part.index);
      if (part.index === 0 && base === bb.first) {
        // Copied as it is: its CRC is known, combined with the header's.
        state = crc32cCombine((state ^ -1) >>> 0, bb.crc, bb.len) ^ -1;
        continue;
      }
    } else writeRecord(w, part.rec, part.index);
    state = crc32cUpdate(state, b, from, w.o);
  }
  return (state ^ -1) >>> 0;
}

type Crc = (b: Buffer) => number;

function encodeRequest(a: RequestArgs, crc32C: Crc, toBig: (v: RequestArgs['producerId']) => bigint): Buffer {
  const now = Date.now();
  const txId = a.transactionalId ?? null;
  const producerId = toBig(a.producerId ?? -1);
  const epoch = a.producerEpoch ?? 0;
  const attributes = txId ? TRANSACTIONAL : 0;
  let total = (txId === null ? 2 : 2 + Buffer.byteLength(txId, 'utf8')) + 2 + 4 + 4;
  const topics = a.topicData.map((t) => {
    total += 2 + Buffer.byteLength(t.topic, 'utf8') + 4;
    const parts = t.partitions.map((p) => {
      const m = measurePartition(p, now);
      total += 8 + m.size;
      return { p, m };
    });
    return { t, parts };
  });
  const w = new Writer(Buffer.allocUnsafe(total));
  const b = w.b;
  w.string16(txId);
  b.writeInt16BE(a.acks, w.o);
  b.writeInt32BE(a.timeout, w.o + 2);
  b.writeInt32BE(topics.length, w.o + 6);
  w.o += 10;
  for (const { t, parts } of topics) {
    w.string16(t.topic);
    b.writeInt32BE(parts.length, w.o);
    w.o += 4;
    for (const { p, m } of parts) {
      b.writeInt32BE(p.partition, w.o);
      b.writeInt32BE(m.size, w.o + 4);
      w.o += 8;
      const start = w.o;
      b.writeBigInt64BE(0n, start); // first offset
      b.writeInt32BE(m.size - 12, start + 8);
      b.writeInt32BE(0, start + 12); // partition leader epoch
      b.writeInt8(MAGIC, start + 16);
      b.writeInt16BE(attributes, start + 21);
      b.writeInt32BE(m.count - 1, start + 23);
      b.writeBigInt64BE(BigInt(m.first), start + 27);
      b.writeBigInt64BE(BigInt(m.max), start + 35);
      b.writeBigInt64BE(producerId, start + 43);
      b.writeInt16BE(epoch, start + 51);
      b.writeInt32BE(p.firstSequence ?? 0, start + 53);
      b.writeInt32BE(m.count, start + 57);
      w.o = start + BATCH_HEADER;
      if (m.parts !== undefined) {
        b.writeUInt32BE(writeParts(w, m.parts, m.first, start), start + 17);
        continue;
      }
      for (let i = 0; i < m.recs.length; i++) writeRecord(w, m.recs[i]!, i);
      b.writeUInt32BE(crc32C(b.subarray(start + 21, w.o)) >>> 0, start + 17);
    }
  }
  if (w.o !== total) throw new Error(`produce request measured ${total} bytes, wrote ${w.o}`);
  return b;
}

/** Encodes a Produce v3 request body as kafkajs would (exported for the byte-for-byte test). */
export function encodeProduceV3(a: RequestArgs): Buffer {
  const k = kafkajsParts();
  return encodeRequest(a, k.crc32C, k.toBig);
}

function kafkajsParts() {
  const Long = require('kafkajs/src/utils/long.js');
  const toBig = (v: RequestArgs['producerId']): bigint =>
    typeof v === 'object' && v !== null && typeof v.value === 'bigint' ? v.value : Long.fromValue(v).value;
  return { crc32C: crc32c as Crc, toBig };
}

function patch(): boolean {
  const target = require.resolve('kafkajs/src/protocol/requests/produce/v3/request.js');
  const v4 = require.resolve('kafkajs/src/protocol/requests/produce/v4/request.js');
  // Too late once a newer version's module took the original.
  if (require.cache[v4] !== undefined) return require.cache[target]?.exports?.sluicePatched === true;
  const original = require(target) as (a: RequestArgs) => unknown;
  const mod = require.cache[target];
  if (mod === undefined) return false;
  const { Types } = require('kafkajs/src/protocol/message/compression/index.js');
  const Encoder = require('kafkajs/src/protocol/encoder.js');
  const { Produce: apiKey } = require('kafkajs/src/protocol/requests/apiKeys.js');
  const { crc32C, toBig } = kafkajsParts();
  const request = (a: RequestArgs) => {
    if ((a.compression ?? Types.None) !== Types.None) return original(a);
    return {
      apiKey,
      apiVersion: 3,
      apiName: 'Produce',
      expectResponse: () => a.acks !== 0,
      encode: async () => {
        const e = new Encoder() as EncoderLike;
        e.buf = encodeRequest(a, crc32C, toBig);
        e.offset = e.buf.length;
        return e;
      },
    };
  };
  request.sluicePatched = true;
  request.original = original;
  mod.exports = request;
  return true;
}

export const produceEncoderPatched = patch();
