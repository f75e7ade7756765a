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
import { crc32c } from './crc32c.js';

const require = createRequire(import.meta.url);

interface Message {
  key?: Buffer | string | null;
  value?: Buffer | string | null;
  timestamp?: string | number | null;
  headers?: Record<string, unknown>;
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

/** Bytes of a record batch before its records (firstOffset … record count). */
const BATCH_HEADER = 61;
const MAGIC = 2;
const TRANSACTIONAL = 16;

const sizeOfVarInt = (v: number): number => {
  let z = ((v << 1) ^ (v >> 31)) >>> 0;
  let n = 1;
  while (z >= 0x80) {
    n++;
    z >>>= 7;
  }
  return n;
};

/** Zigzag varlong of a safe integer (a timestamp delta). */
const sizeOfVarLong = (v: number): number => {
  let z = v >= 0 ? v * 2 : -v * 2 - 1;
  let n = 1;
  while (z >= 0x80) {
    n++;
    z = Math.floor(z / 0x80);
  }
  return n;
};

/** Byte length of a key, value or header value (null: none, written as -1). */
const lengthOf = (v: unknown): number => {
  if (v === null || v === undefined) return -1;
  if (Buffer.isBuffer(v)) return v.length;
  return Buffer.byteLength(String(v), 'utf8');
};

const sizeOfBytes = (len: number): number => sizeOfVarInt(len) + Math.max(len, 0);

/** Headers as kafkajs flattens them: an array value is one header per element. */
function headerList(headers: Record<string, unknown> | undefined): Array<[string, unknown]> | undefined {
  if (headers === undefined || headers === null) return undefined;
  let out: Array<[string, unknown]> | undefined;
  for (const k in headers) {
    const v = headers[k];
    out ??= [];
    if (Array.isArray(v)) for (const x of v) out.push([k, x]);
    else out.push([k, v]);
  }
  return out;
}

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

function measurePartition(p: PartitionData, now: number) {
  const msgs = p.messages;
  let first = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  const ts = new Array<number>(msgs.length);
  for (let i = 0; i < msgs.length; i++) {
    const raw = msgs[i]!.timestamp;
    // kafkajs: a missing (or empty) timestamp is the send time, and does not count for first/max.
    const t = raw === null || raw === undefined || raw === '' ? Number.NaN : Number(raw);
    ts[i] = t;
    if (t < first) first = t;
    if (t > max) max = t;
  }
  if (first === Number.POSITIVE_INFINITY) first = max = now;
  const recs = new Array<Measured>(msgs.length);
  let size = BATCH_HEADER;
  for (let i = 0; i < msgs.length; i++) {
    const m = msgs[i]!;
    const keyLen = lengthOf(m.key);
    const valueLen = lengthOf(m.value);
    const headers = headerList(m.headers);
    const raw = m.timestamp;
    // As kafkajs: `(timestamp || now) - first`, so a missing, empty or numeric-0 one is now.
    const delta = (raw === null || raw === undefined || raw === '' || raw === 0 ? now : ts[i]!) - first;
    let body = 1 + sizeOfVarLong(delta) + sizeOfVarInt(i) + sizeOfBytes(keyLen) + sizeOfBytes(valueLen);
    let headerLens: number[] | undefined;
    if (headers === undefined) body += 1;
    else {
      body += sizeOfVarInt(headers.length);
      headerLens = new Array(headers.length);
      for (let h = 0; h < headers.length; h++) {
        const [k, v] = headers[h]!;
        const kl = Buffer.byteLength(k, 'utf8');
        const vl = lengthOf(v);
        headerLens[h] = vl;
        body += sizeOfVarInt(kl) + kl + sizeOfBytes(vl);
      }
    }
    recs[i] = { m, keyLen, valueLen, headers, headerLens, delta, body };
    size += sizeOfVarInt(body) + body;
  }
  return { recs, first, max, size };
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
      b.writeInt32BE(m.recs.length - 1, start + 23);
      b.writeBigInt64BE(BigInt(m.first), start + 27);
      b.writeBigInt64BE(BigInt(m.max), start + 35);
      b.writeBigInt64BE(producerId, start + 43);
      b.writeInt16BE(epoch, start + 51);
      b.writeInt32BE(p.firstSequence ?? 0, start + 53);
      b.writeInt32BE(m.recs.length, start + 57);
      w.o = start + BATCH_HEADER;
      for (let i = 0; i < m.recs.length; i++) {
        const r = m.recs[i]!;
        w.varInt(r.body);
        b[w.o++] = 0; // attributes
        w.varLong(r.delta);
        w.varInt(i);
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
