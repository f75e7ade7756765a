import { SerdeError } from '../errors.js';
import { partitionOfKey } from '../kafka/partitioner.js';
import type { PartitionsOf } from '../kafka/producer.js';
import { appendTo, BATCH_OVERHEAD, type BatchBuilder, builderBound } from '../kafka/record-batch.js';
import type { OutRecord } from '../kafka/types.js';
import type { Emitter } from './operators.js';

/**
 * The partition counts of a task's producer for its collector, when it has them (the test
 * driver's producers know no metadata: their outputs stay plain records).
 */
export function partitionsFrom(
  p: { partitionsOf?(topic: string): number | undefined } | undefined,
): PartitionsOf | undefined {
  return typeof p?.partitionsOf === 'function' ? (t) => p.partitionsOf!(t) : undefined;
}

interface TopicOut {
  /** The topic's entries: plain records, or one entry per builder (`OutRecord.batch`). */
  list: OutRecord[];
  /** The topic's partition count when this interval's first output came; 0: plain records. */
  partitions: number;
  /** The builder each partition writes into now. */
  builders: Array<BatchBuilder | undefined>;
  /** The largest record batch the topic takes (0: no bound known). */
  maxBytes: number;
  /** A builder's bound: BUILDER_BYTES, or less for a topic that takes less. */
  builderBytes: number;
}

/** The output is larger than its topic takes (`max.message.bytes`): an error of the record's. */
export class RecordTooLargeError extends SerdeError {
  constructor(topic: string, bytes: number, max: number) {
    super(`an output of ${bytes} bytes is over the ${max} bytes topic ${topic} takes (max.message.bytes)`);
    this.name = 'RecordTooLargeError';
  }
}

/**
 * Buffers a task's outputs until its next checkpoint. Outputs of a record that failed halfway
 * are taken back (`truncate`), so a poison record leaves no partial output behind.
 *
 * Given `partitionsOf` (the task's producer's metadata), an output of a topic whose partition
 * count is known is written at once into a record batch of its partition (record-batch.ts): its
 * key's murmur2 hash picks the partition, as the producer's partitioner would. The checkpoint
 * then sends the bytes as they are, instead of partitioning, measuring, encoding and checksumming
 * every record between the interval's end and the request leaving, and no object per output
 * lives until then. A keyless output (round robin at the send) and a topic the metadata does not
 * know yet stay plain records for the interval, as without it. A timestamp that is not a whole
 * number of ms becomes the time of the write (the encoder sends a plain one with the send time).
 */
export class Collector implements Emitter {
  readonly #topics = new Map<string, TopicOut>();
  /** Output count, for rollback marks. */
  count = 0;
  /** Per output: the list it went to, or the builder that wrote it. */
  readonly #log: Array<OutRecord[] | BatchBuilder> = [];
  /** Partition counts of the task's producer (undefined: every output a plain record). */
  partitionsOf: PartitionsOf | undefined;
  /**
   * Each output topic's `max.message.bytes` (read at the worker's start): a larger output throws
   * {@link RecordTooLargeError} where it is emitted, so its record is dead-lettered instead of the
   * checkpoint failing on it again and again.
   */
  limits: ReadonlyMap<string, number> | undefined;

  emit(
    topic: string,
    key: Buffer | null,
    value: Buffer | null,
    timestamp: number,
    headers: Record<string, unknown> | undefined,
    /** A given partition (watermark control records); else the key's hash picks it. */
    partition?: number,
  ): void {
    let t = this.#topics.get(topic);
    if (t === undefined) {
      const max = this.limits?.get(topic) ?? 0;
      const builderBytes = builderBound(max);
      t = {
        list: [],
        partitions: this.partitionsOf?.(topic) ?? 0,
        builders: [],
        maxBytes: max,
        builderBytes,
      };
      this.#topics.set(topic, t);
    }
    if (t.maxBytes > 0) {
      const bytes = (key?.length ?? 0) + (value?.length ?? 0) + (headers ? headerBytes(headers) : 0);
      if (bytes + BATCH_OVERHEAD > t.maxBytes) throw new RecordTooLargeError(topic, bytes, t.maxBytes);
    }
    if (t.partitions > 0 && (partition !== undefined || key !== null)) {
      // A timestamp that is not a whole number of ms (a user's bad one) cannot be a batch's base:
      // such a record gets the time it is written, as the encoder gives a plain one.
      const ts = Number.isSafeInteger(timestamp) ? timestamp : Date.now();
      const p = partition ?? partitionOfKey(key!, t.partitions);
      const b = appendTo(t.list, t.builders[p], p, key, value, ts, headers, t.builderBytes);
      t.builders[p] = b;
      // Counted once written: a record that failed to write leaves the marks as they were.
      this.#log.push(b);
      this.count++;
      return;
    }
    const rec: OutRecord = { key, value, timestamp: String(timestamp) };
    if (headers !== undefined) rec.headers = headers as OutRecord['headers'];
    if (partition !== undefined) rec.partition = partition;
    t.list.push(rec);
    this.#log.push(t.list);
    this.count++;
  }

  /** Drops the outputs emitted after `mark` (a value of `count` taken earlier). */
  truncate(mark: number): void {
    while (this.count > mark) {
      this.#log.pop()!.pop();
      this.count--;
    }
  }

  /** Hands the buffered outputs over and starts empty. */
  drain(): Map<string, OutRecord[]> {
    const out = new Map<string, OutRecord[]>();
    for (const [topic, t] of this.#topics) {
      // A builder whose every record was taken back stays out (a batch holds at least one).
      const list =
        t.partitions > 0 ? t.list.filter((e) => e.batch === undefined || e.batch.count > 0) : t.list;
      if (list.length > 0) out.set(topic, list);
    }
    this.clear();
    return out;
  }

  clear(): void {
    this.#topics.clear();
    this.#log.length = 0;
    this.count = 0;
  }
}

/**
 * Emits the record unless its topic cannot take it: false then (`RecordTooLargeError`), for the
 * caller's fallback (a dead letter without its value, a shed record processed instead).
 */
export function emitsWithin(
  emitter: Emitter,
  topic: string,
  key: Buffer | null,
  value: Buffer | null,
  timestamp: number,
  headers: Record<string, unknown> | undefined,
): boolean {
  try {
    emitter.emit(topic, key, value, timestamp, headers);
    return true;
  } catch (e) {
    if (e instanceof RecordTooLargeError) return false;
    throw e;
  }
}

/** The bytes of a record's headers, near enough: names and values, 8 more for their lengths. */
function headerBytes(h: Record<string, unknown>): number {
  let n = 0;
  for (const k in h) {
    const v = h[k];
    n += Buffer.byteLength(k) + 8;
    if (Array.isArray(v)) for (const x of v) n += byteLength(x) + 8;
    else n += byteLength(v);
  }
  return n;
}

const byteLength = (v: unknown): number =>
  Buffer.isBuffer(v) ? v.length : typeof v === 'string' ? Buffer.byteLength(v) : v == null ? 0 : 16;
