import type { Serde } from '../api/serdes.js';
import type { Headers } from '../kafka/types.js';
import { DLQ_HEADERS } from '../runtime/dead-letter.js';
import type { SimRecord, SimulatedKafka } from './sim-kafka.js';

/** Options of one input record. */
export interface PipeOptions {
  /** Kafka timestamp, ms (default: the driver's wall clock). */
  timestamp?: number;
  /** The input partition (default: the real partitioner on the key bytes, round robin for a null key). */
  partition?: number;
  headers?: Record<string, string | Buffer>;
}

/** A record read back from an output topic. */
export interface OutputRecord<K = unknown, V = unknown> {
  key: K;
  value: V;
  timestamp: number;
  partition: number;
  offset: number;
  /** Header values as UTF-8 text; undefined when the record has none. */
  headers: Record<string, string> | undefined;
}

/** A record of the dead-letter topic `<appId>-dlq`: the original bytes and what went wrong. */
export interface DeadLetter {
  key: Buffer | null;
  value: Buffer | null;
  timestamp: number;
  partition: number;
  error: { class: string; message: string; kind: string; operator: string | undefined };
  source: { topic: string; partition: number; offset: number; timestamp: number };
  headers: Record<string, string>;
}

function headerText(h: Headers | undefined): Record<string, string> | undefined {
  if (!h) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined) continue;
    const one = Array.isArray(v) ? v[v.length - 1] : v;
    if (one !== undefined) out[k] = Buffer.isBuffer(one) ? one.toString('utf8') : String(one);
  }
  return out;
}

/** Writes records into one input topic of the simulated cluster; the driver then processes them. */
export class TestInput<K = unknown, V = unknown> {
  readonly topic: string;
  readonly #key: Serde<K>;
  readonly #value: Serde<V>;
  readonly #write: (r: Omit<SimRecord, 'offset' | 'partition'>, partition: number | undefined) => void;
  readonly #run: () => Promise<void>;
  readonly #now: () => number;
  /** Schema Registry serdes write with ids resolved at the driver's start: pipes wait for it. */
  readonly #ready: (() => Promise<void>) | undefined;

  /** @internal (made by `TestDriver.input`) */
  constructor(
    topic: string,
    serdes: { key: Serde<K>; value: Serde<V> },
    io: {
      write: (r: Omit<SimRecord, 'offset' | 'partition'>, partition: number | undefined) => void;
      run: () => Promise<void>;
      now: () => number;
      ready?: () => Promise<void>;
    },
  ) {
    this.topic = topic;
    this.#key = serdes.key;
    this.#value = serdes.value;
    this.#write = io.write;
    this.#run = io.run;
    this.#now = io.now;
    this.#ready = io.ready;
  }

  #append(key: K | null, value: V | null, o: PipeOptions): void {
    const k = key === null || key === undefined ? null : this.#key.serialize(key);
    const v = value === null || value === undefined ? null : this.#value.serialize(value);
    this.appendRaw(k, v, o);
  }

  /** Appends without processing (the next pipe, commit or wall-clock advance processes it). */
  appendRaw(key: Buffer | null, value: Buffer | null, o: PipeOptions = {}): void {
    const ts = o.timestamp ?? this.#now();
    if (!Number.isFinite(ts)) throw new RangeError(`timestamp must be a finite number, got ${ts}`);
    this.#write(
      {
        key,
        value,
        timestamp: String(Math.floor(ts)),
        ...(o.headers !== undefined ? { headers: { ...o.headers } } : {}),
      },
      o.partition,
    );
  }

  /** Appends one record (serialized with the source's serdes) and processes until quiescent. */
  async pipe(key: K | null, value: V | null, o: PipeOptions = {}): Promise<void> {
    if (this.#ready) await this.#ready();
    this.#append(key, value, o);
    await this.#run();
  }

  /** Appends the records in order, then processes them (one batch per partition). */
  async pipeAll(records: ReadonlyArray<{ key: K | null; value: V | null } & PipeOptions>): Promise<void> {
    if (this.#ready) await this.#ready();
    for (const r of records) this.#append(r.key, r.value, r);
    await this.#run();
  }

  /** Appends one record of raw bytes (a poison record, say) and processes until quiescent. */
  async pipeRaw(key: Buffer | null, value: Buffer | null, o: PipeOptions = {}): Promise<void> {
    this.appendRaw(key, value, o);
    await this.#run();
  }
}

/**
 * Reads one output topic of the simulated cluster: only committed records, as a `read_committed`
 * consumer sees them. `readAll()` returns what this reader has not returned yet.
 */
export class TestOutput<K = unknown, V = unknown> {
  readonly topic: string;
  readonly #kafka: SimulatedKafka;
  readonly #key: Serde<K>;
  readonly #value: Serde<V>;
  #positions: number[] = [];

  /** @internal (made by `TestDriver.output`) */
  constructor(topic: string, kafka: SimulatedKafka, serdes: { key: Serde<K>; value: Serde<V> }) {
    this.topic = topic;
    this.#kafka = kafka;
    this.#key = serdes.key;
    this.#value = serdes.value;
  }

  #decode(r: SimRecord): OutputRecord<K, V> {
    return {
      key: (r.key === null ? null : this.#key.deserialize(r.key)) as K,
      value: (r.value === null ? null : this.#value.deserialize(r.value)) as V,
      timestamp: Number(r.timestamp),
      partition: r.partition,
      offset: Number(r.offset),
      headers: headerText(r.headers),
    };
  }

  /** Every committed record of the topic, partition by partition, in offset order; moves nothing. */
  all(): OutputRecord<K, V>[] {
    if (!this.#kafka.hasTopic(this.topic)) return [];
    return this.#kafka.readAll(this.topic).map((r) => this.#decode(r));
  }

  /**
   * The committed records this reader has not returned yet, in the order they were committed
   * within each partition (partition by partition), as Kafka Streams' `readRecordsToList`.
   */
  readAll(): OutputRecord<K, V>[] {
    if (!this.#kafka.hasTopic(this.topic)) return [];
    const n = this.#kafka.partitionCount(this.topic);
    const out: OutputRecord<K, V>[] = [];
    for (let p = 0; p < n; p++) {
      const from = this.#positions[p] ?? 0;
      const rs = this.#kafka.read(this.topic, p, BigInt(from));
      for (const r of rs) out.push(this.#decode(r));
      this.#positions[p] = from + rs.length;
    }
    return out;
  }

  /** The values of {@link readAll}. */
  readValues(): V[] {
    return this.readAll().map((r) => r.value);
  }

  /** {@link readAll} as a map of the latest value per key (a table's view of the topic). */
  readKeyValueMap(): Map<K, V> {
    return new Map(this.readAll().map((r) => [r.key, r.value]));
  }

  /** True when {@link readAll} would return nothing. */
  get isEmpty(): boolean {
    if (!this.#kafka.hasTopic(this.topic)) return true;
    const n = this.#kafka.partitionCount(this.topic);
    for (let p = 0; p < n; p++)
      if (this.#kafka.endOffset(this.topic, p) > BigInt(this.#positions[p] ?? 0)) return false;
    return true;
  }
}

/** Decodes the records of the dead-letter topic. */
export function deadLettersOf(kafka: SimulatedKafka, topic: string): DeadLetter[] {
  if (!kafka.hasTopic(topic)) return [];
  return kafka.readAll(topic).map((r) => {
    const h = headerText(r.headers) ?? {};
    return {
      key: r.key,
      value: r.value,
      timestamp: Number(r.timestamp),
      partition: r.partition,
      error: {
        class: h[DLQ_HEADERS.errorClass] ?? '',
        message: h[DLQ_HEADERS.errorMessage] ?? '',
        kind: h[DLQ_HEADERS.errorKind] ?? '',
        operator: h[DLQ_HEADERS.operator],
      },
      source: {
        topic: h[DLQ_HEADERS.topic] ?? '',
        partition: Number(h[DLQ_HEADERS.partition]),
        offset: Number(h[DLQ_HEADERS.offset]),
        timestamp: Number(h[DLQ_HEADERS.timestamp]),
      },
      headers: h,
    };
  });
}
