/**
 * Kafka's record format (magic 2) as the producer writes it, and the {@link BatchBuilder} that
 * writes a partition's records as they are made.
 *
 * A task's outputs used to wait for the checkpoint as objects (a record, its key and value
 * Buffers, its timestamp as a decimal string), and the checkpoint then partitioned them (a
 * murmur2 hash per record), measured them, encoded them into the Produce request and checksummed
 * every byte, all between the interval's end and the request leaving: about 8 ms of a 20 ms
 * checkpoint at half load on the running sum (issue 19; the numbers in CHANGELOG.md). The objects
 * lived through one or two scavenges and were promoted. The collector (src/runtime/collector.ts)
 * now hands each output to the builder of its partition, which writes the record's bytes at once
 * into an off-heap buffer and carries the batch's CRC over them; the Produce encoder
 * (produce-encoder.ts) then writes the batch header, copies the bytes and combines the CRCs.
 *
 * A builder's records are one batch: offsets 0..n-1, timestamps as deltas from its first record's
 * (as the Java producer writes them, negative when a later record is older). Several builders for
 * one partition in one request (several tasks writing one repartition partition) are merged into
 * one batch by rewriting each record's two deltas (`writeRebased`), not by encoding it again.
 */
import { crc32cUpdate } from './crc32c.js';

/** Bytes of a record batch before its records (firstOffset … record count). */
export const BATCH_HEADER = 61;

export const sizeOfVarInt = (v: number): number => {
  let z = ((v << 1) ^ (v >> 31)) >>> 0;
  let n = 1;
  while (z >= 0x80) {
    n++;
    z >>>= 7;
  }
  return n;
};

/** Zigzag varlong of a safe integer (a timestamp delta). */
export const sizeOfVarLong = (v: number): number => {
  let z = v >= 0 ? v * 2 : -v * 2 - 1;
  let n = 1;
  while (z >= 0x80) {
    n++;
    z = Math.floor(z / 0x80);
  }
  return n;
};

/** Byte length of a key, value or header value (null: none, written as -1). */
export const lengthOf = (v: unknown): number => {
  if (v === null || v === undefined) return -1;
  if (Buffer.isBuffer(v)) return v.length;
  return Buffer.byteLength(String(v), 'utf8');
};

export const sizeOfBytes = (len: number): number => sizeOfVarInt(len) + Math.max(len, 0);

/** Headers as kafkajs flattens them: an array value is one header per element. */
export function headerList(
  headers: Record<string, unknown> | undefined,
): Array<[string, unknown]> | undefined {
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

export function putVarInt(b: Buffer, o: number, v: number): number {
  let z = ((v << 1) ^ (v >> 31)) >>> 0;
  while (z >= 0x80) {
    b[o++] = (z & 0x7f) | 0x80;
    z >>>= 7;
  }
  b[o++] = z;
  return o;
}

export function putVarLong(b: Buffer, o: number, v: number): number {
  let z = v >= 0 ? v * 2 : -v * 2 - 1;
  while (z >= 0x80) {
    b[o++] = (z % 0x80) | 0x80;
    z = Math.floor(z / 0x80);
  }
  b[o++] = z;
  return o;
}

/** A varint length and the bytes (`len` from {@link lengthOf}). */
export function putBytes(b: Buffer, o: number, v: unknown, len: number): number {
  o = putVarInt(b, o, len);
  if (len <= 0) return o;
  if (Buffer.isBuffer(v)) {
    // TypedArray#set: the same bytes as Buffer#copy, without its argument handling (small records).
    b.set(v, o);
    return o + len;
  }
  return o + b.write(String(v), o, len, 'utf8');
}

/** The headers part of a record's body: its size, and its lengths (for the write). */
export function measureHeaders(headers: Array<[string, unknown]> | undefined): {
  size: number;
  lens?: number[];
} {
  if (headers === undefined) return { size: 1 };
  let size = sizeOfVarInt(headers.length);
  const lens = new Array<number>(headers.length);
  for (let h = 0; h < headers.length; h++) {
    const [k, v] = headers[h]!;
    const kl = Buffer.byteLength(k, 'utf8');
    const vl = lengthOf(v);
    lens[h] = vl;
    size += sizeOfVarInt(kl) + kl + sizeOfBytes(vl);
  }
  return { size, lens };
}

/** What one record's body needs (magic 2), measured once: its size, and the lengths to write. */
export interface MeasuredBody {
  keyLen: number;
  valueLen: number;
  headers: Array<[string, unknown]> | undefined;
  headerLens: number[] | undefined;
  body: number;
}

export function measureBody(
  key: unknown,
  value: unknown,
  headers: Record<string, unknown> | undefined,
  delta: number,
  index: number,
): MeasuredBody {
  const keyLen = lengthOf(key);
  const valueLen = lengthOf(value);
  const hs = headerList(headers);
  const hm = hs === undefined ? undefined : measureHeaders(hs);
  const body =
    1 +
    sizeOfVarLong(delta) +
    sizeOfVarInt(index) +
    sizeOfBytes(keyLen) +
    sizeOfBytes(valueLen) +
    (hm?.size ?? 1);
  return { keyLen, valueLen, headers: hs, headerLens: hm?.lens, body };
}

export function putHeaders(
  b: Buffer,
  o: number,
  headers: Array<[string, unknown]> | undefined,
  lens: number[] | undefined,
): number {
  if (headers === undefined) return putVarInt(b, o, 0);
  o = putVarInt(b, o, headers.length);
  for (let h = 0; h < headers.length; h++) {
    const [k, v] = headers[h]!;
    o = putBytes(b, o, k, Buffer.byteLength(k, 'utf8'));
    o = putBytes(b, o, v, lens![h]!);
  }
  return o;
}

/** The zigzag varint at `o`: its value and its size in bytes. */
function readVarInt(b: Buffer, o: number): { value: number; size: number } {
  let z = 0;
  let shift = 0;
  let i = o;
  for (;;) {
    const x = b[i++]!;
    z |= (x & 0x7f) << shift;
    if (x < 0x80) break;
    shift += 7;
  }
  return { value: (z >>> 1) ^ -(z & 1), size: i - o };
}

/** A builder starts this small (at-least-once makes one per partition and batch) and doubles. */
const INITIAL_BYTES = 1024;
const INITIAL_RECORDS = 16;

/**
 * One partition's records, written as they come: the records part of one record batch, its
 * CRC-32C carried along, and per record its start, timestamp and the CRC before it (so that the
 * last record can be taken back: a record whose processing failed leaves no output).
 */
export class BatchBuilder {
  readonly partition: number;
  /** The records' bytes are `buf[0, len)`. */
  buf: Buffer;
  len = 0;
  count = 0;
  /** The first record's timestamp: the batch's base. */
  first = 0;
  max = Number.NEGATIVE_INFINITY;
  /** Key and value bytes (the checkpoint's size metric). */
  keyValueBytes = 0;
  /** Per record: where it starts, its timestamp, and the running CRC before it. */
  starts: Int32Array;
  stamps: Float64Array;
  #crcs: Int32Array;
  #crc = -1;

  constructor(partition: number) {
    this.partition = partition;
    this.buf = Buffer.allocUnsafe(INITIAL_BYTES);
    this.starts = new Int32Array(INITIAL_RECORDS);
    this.stamps = new Float64Array(INITIAL_RECORDS);
    this.#crcs = new Int32Array(INITIAL_RECORDS);
  }

  /** The CRC-32C of the records' bytes. */
  get crc(): number {
    return (this.#crc ^ -1) >>> 0;
  }

  /** Bytes as a batch of its own (header and records). */
  get size(): number {
    return BATCH_HEADER + this.len;
  }

  /**
   * Writes one record; returns its size in bytes. With `bound`, a record that would take a
   * builder holding records past that many bytes is not written: -1 (a batch of its own then).
   * `timestamp` is a safe integer (the collector gives others the time of the write).
   */
  append(
    key: Buffer | string | null,
    value: Buffer | string | null,
    timestamp: number,
    headers: Record<string, unknown> | undefined,
    bound = Number.POSITIVE_INFINITY,
  ): number {
    const i = this.count;
    const delta = i === 0 ? 0 : timestamp - this.first;
    const { keyLen, valueLen, headers: hs, headerLens, body } = measureBody(key, value, headers, delta, i);
    const need = sizeOfVarInt(body) + body;
    if (i > 0 && this.len + need > bound) return -1;
    if (i === 0) this.first = timestamp;
    if (this.len + need > this.buf.length) this.#grow(this.len + need);
    if (i === this.starts.length) this.#growIndex();
    const start = this.len;
    const b = this.buf;
    let o = putVarInt(b, start, body);
    b[o++] = 0; // attributes
    o = putVarLong(b, o, delta);
    o = putVarInt(b, o, i);
    o = putBytes(b, o, key, keyLen);
    o = putBytes(b, o, value, valueLen);
    o = putHeaders(b, o, hs, headerLens);
    if (o - start !== need) throw new Error(`record measured ${need} bytes, wrote ${o - start}`);
    this.starts[i] = start;
    this.stamps[i] = timestamp;
    this.#crcs[i] = this.#crc;
    this.#crc = crc32cUpdate(this.#crc, b, start, o);
    this.len = o;
    this.count = i + 1;
    if (timestamp > this.max) this.max = timestamp;
    this.keyValueBytes += Math.max(keyLen, 0) + Math.max(valueLen, 0);
    return need;
  }

  /** Takes the last record back. */
  pop(): void {
    const i = --this.count;
    const start = this.starts[i]!;
    const body = readVarInt(this.buf, start);
    const restStart = start + body.size + 1 + sizeOfVarLong(this.stamps[i]! - this.first) + sizeOfVarInt(i);
    // Key and value lengths, to keep the byte count right.
    const k = readVarInt(this.buf, restStart);
    const v = readVarInt(this.buf, restStart + k.size + Math.max(k.value, 0));
    this.keyValueBytes -= Math.max(k.value, 0) + Math.max(v.value, 0);
    this.len = start;
    this.#crc = this.#crcs[i]!;
    let max = Number.NEGATIVE_INFINITY;
    for (let j = 0; j < i; j++) if (this.stamps[j]! > max) max = this.stamps[j]!;
    this.max = max;
  }

  /**
   * The records' size when rewritten into a batch whose base timestamp is `base` and whose first
   * offset delta for them is `firstIndex` ({@link writeRebased}).
   */
  sizeRebased(base: number, firstIndex: number): number {
    if (base === this.first && firstIndex === 0) return this.len;
    let size = 0;
    for (let i = 0; i < this.count; i++) {
      const [restStart, restEnd] = this.#rest(i);
      const body =
        1 + sizeOfVarLong(this.stamps[i]! - base) + sizeOfVarInt(firstIndex + i) + (restEnd - restStart);
      size += sizeOfVarInt(body) + body;
    }
    return size;
  }

  /** Writes the records at `b[o…]` as {@link sizeRebased} measured them; returns the end. */
  writeRebased(b: Buffer, o: number, base: number, firstIndex: number): number {
    if (base === this.first && firstIndex === 0) {
      this.buf.copy(b, o, 0, this.len);
      return o + this.len;
    }
    for (let i = 0; i < this.count; i++) {
      const [restStart, restEnd] = this.#rest(i);
      const delta = this.stamps[i]! - base;
      const body = 1 + sizeOfVarLong(delta) + sizeOfVarInt(firstIndex + i) + (restEnd - restStart);
      o = putVarInt(b, o, body);
      b[o++] = 0;
      o = putVarLong(b, o, delta);
      o = putVarInt(b, o, firstIndex + i);
      this.buf.copy(b, o, restStart, restEnd);
      o += restEnd - restStart;
    }
    return o;
  }

  /** Where record i's key length starts, and where the record ends. */
  #rest(i: number): [number, number] {
    const start = this.starts[i]!;
    const end = i + 1 < this.count ? this.starts[i + 1]! : this.len;
    const lenSize = readVarInt(this.buf, start).size;
    return [start + lenSize + 1 + sizeOfVarLong(this.stamps[i]! - this.first) + sizeOfVarInt(i), end];
  }

  #grow(need: number): void {
    let n = this.buf.length * 2;
    while (n < need) n *= 2;
    const b = Buffer.allocUnsafe(n);
    this.buf.copy(b, 0, 0, this.len);
    this.buf = b;
  }

  #growIndex(): void {
    const n = this.starts.length * 2;
    const s = new Int32Array(n);
    s.set(this.starts);
    this.starts = s;
    const t = new Float64Array(n);
    t.set(this.stamps);
    this.stamps = t;
    const c = new Int32Array(n);
    c.set(this.#crcs);
    this.#crcs = c;
  }
}

/**
 * A record that would take a builder past this goes to a new one (a record larger than it gets a
 * builder of its own). Below producer.ts MAX_SEND_BYTES, the bound of a partition's bytes per
 * send, so that a builder always fits one send, and two merged there stay within it; far below
 * the broker's `message.max.bytes` (1 MiB).
 */
export const BUILDER_BYTES = 500 * 1024;

/** A record batch's bytes around its one record, and a record's own around its key and value. */
export const BATCH_OVERHEAD = BATCH_HEADER + 21;

/** A builder's bound for a topic that takes `max` bytes (`max.message.bytes`; 0: unknown). */
export const builderBound = (max: number): number =>
  max > 0 ? Math.min(BUILDER_BYTES, max - BATCH_OVERHEAD) : BUILDER_BYTES;

/**
 * Writes a record into `current` (a partition's builder in `list`), or, when there is none or the
 * record would take it past {@link BUILDER_BYTES}, into a new builder added at the list's end (the
 * next send). Returns the builder that holds the record. The collector keeps a current builder per
 * partition; a task's changelog records (one partition) go into the list's last one.
 */
export function appendTo(
  list: Array<{ key: unknown; value: unknown; partition?: number; batch?: BatchBuilder }>,
  current: BatchBuilder | undefined,
  partition: number,
  key: Buffer | string | null,
  value: Buffer | string | null,
  timestamp: number,
  headers?: Record<string, unknown>,
  /** A smaller bound for a topic that takes less (its `max.message.bytes`). */
  maxBytes = BUILDER_BYTES,
): BatchBuilder {
  if (current !== undefined && current.append(key, value, timestamp, headers, maxBytes) >= 0) return current;
  const next = new BatchBuilder(partition);
  next.append(key, value, timestamp, headers);
  list.push({ key: null, value: null, partition, batch: next });
  return next;
}

/** Records in an output list: a batch entry counts its records. */
export function recordCount(list: ReadonlyArray<{ batch?: BatchBuilder }>): number {
  let n = 0;
  for (let i = 0; i < list.length; i++) {
    const b = list[i]!.batch;
    n += b === undefined ? 1 : b.count;
  }
  return n;
}
