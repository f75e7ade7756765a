import type { KafkaClient } from '../kafka/client.js';
import { partitionForKey } from '../kafka/partitioner.js';
import type { TopicRecords, WrittenOffsets } from '../kafka/producer.js';
import type { Headers, InRecord, TopicPartitionOffset, TopicSpec } from '../kafka/types.js';

/** One record as the simulated log holds it. */
export interface SimRecord extends InRecord {
  partition: number;
}

interface SimTopic {
  partitions: SimRecord[][];
  config: Record<string, string>;
  /** Next partition for a record without key or partition (round robin: deterministic). */
  rr: number;
}

/** The error a fenced producer gets: named as the broker names it, so `isFencedError` knows it. */
export class SimulatedFencedError extends Error {
  readonly type = 'PRODUCER_FENCED';
  readonly code = 90;
  constructor(id: string) {
    super(`simulated Kafka: producer ${id} was fenced by a newer one with the same transactional id`);
    this.name = 'KafkaJSProtocolError';
  }
}

/**
 * An in-memory Kafka, for the test driver: topics of partitions of records with offsets,
 * transactions that become visible all at once when they commit (so a read sees only committed
 * records, like `read_committed`), committed offsets per group, and producer epochs per
 * transactional id (a newer producer fences the older one). It implements exactly the subset of
 * `KafkaClient`, `KafkaAdmin`, `TransactionalProducer`, `PlainProducer` and `PartitionReader` that
 * a `Task` and its state restore call; nothing here touches the network.
 */
export class SimulatedKafka {
  readonly #topics = new Map<string, SimTopic>();
  readonly #groups = new Map<string, Map<string, { offset: string; metadata: string | null }>>();
  readonly #epochs = new Map<string, number>();
  /** Transactions committed (for tests of the driver itself). */
  commits = 0;
  /** When set, the next commit of a transaction fails with this error (and nothing of it is written). */
  failNextCommit: Error | undefined;

  createTopic(topic: string, partitions: number, config: Record<string, string> = {}): void {
    if (this.#topics.has(topic)) return;
    if (!Number.isInteger(partitions) || partitions < 1)
      throw new RangeError(`topic ${topic}: partitions must be a positive integer, got ${partitions}`);
    this.#topics.set(topic, { partitions: Array.from({ length: partitions }, () => []), config, rr: 0 });
  }

  hasTopic(topic: string): boolean {
    return this.#topics.has(topic);
  }

  topics(): string[] {
    return [...this.#topics.keys()];
  }

  partitionCount(topic: string): number {
    return this.#topic(topic).partitions.length;
  }

  #topic(topic: string): SimTopic {
    const t = this.#topics.get(topic);
    if (!t) throw new Error(`simulated Kafka: topic ${topic} does not exist`);
    return t;
  }

  /** The records of one partition from `from` (inclusive), in offset order. */
  read(topic: string, partition: number, from = 0n): SimRecord[] {
    const log = this.#topic(topic).partitions[partition];
    if (!log) throw new Error(`simulated Kafka: ${topic} has no partition ${partition}`);
    return from <= 0n ? log.slice() : log.slice(Number(from));
  }

  /** Every record of a topic, partition by partition. */
  readAll(topic: string): SimRecord[] {
    return this.#topic(topic).partitions.flat();
  }

  endOffset(topic: string, partition: number): bigint {
    return BigInt(this.read(topic, partition).length);
  }

  /** The partition a record goes to: its own, else the key's murmur2 hash, else round robin. */
  partitionOf(topic: string, key: Buffer | null, partition?: number): number {
    const t = this.#topic(topic);
    if (partition !== undefined) {
      if (!Number.isInteger(partition) || partition < 0 || partition >= t.partitions.length)
        throw new RangeError(
          `topic ${topic} has no partition ${partition} (${t.partitions.length} partitions)`,
        );
      return partition;
    }
    if (key !== null) return partitionForKey(key, t.partitions.length);
    const p = t.rr % t.partitions.length;
    t.rr++;
    return p;
  }

  /** Appends one record (already committed: a plain, non-transactional write). */
  append(
    topic: string,
    r: { key: Buffer | null; value: Buffer | null; timestamp: string; headers?: Headers | undefined },
    partition?: number,
  ): SimRecord {
    const p = this.partitionOf(topic, r.key, partition);
    const log = this.#topic(topic).partitions[p]!;
    const rec: SimRecord = {
      key: r.key,
      value: r.value,
      timestamp: r.timestamp,
      offset: String(log.length),
      partition: p,
    };
    if (r.headers !== undefined) rec.headers = r.headers;
    log.push(rec);
    return rec;
  }

  /** Writes a producer's records; returns the last offset written per `topic:partition`. */
  write(records: TopicRecords, now: number): WrittenOffsets {
    const written: WrittenOffsets = new Map();
    for (const [topic, list] of records) {
      for (const m of list) {
        const ts = m.timestamp ?? String(now);
        const r = this.append(
          topic,
          { key: m.key, value: m.value, timestamp: ts, headers: m.headers },
          m.partition,
        );
        written.set(`${topic}:${r.partition}`, BigInt(r.offset));
      }
    }
    return written;
  }

  commitOffsets(groupId: string, offsets: readonly TopicPartitionOffset[]): void {
    let g = this.#groups.get(groupId);
    if (!g) this.#groups.set(groupId, (g = new Map()));
    for (const o of offsets)
      g.set(`${o.topic}:${o.partition}`, { offset: o.offset, metadata: o.metadata ?? null });
  }

  committed(
    groupId: string,
    topic: string,
    partition: number,
  ): { offset: string; metadata: string | null } | undefined {
    return this.#groups.get(groupId)?.get(`${topic}:${partition}`);
  }

  /**
   * A fenced transactional producer: its epoch is the newest for `id`, so every earlier producer
   * of that id fails its next commit (as a zombie's does against the broker).
   */
  transactionalProducer(id: string, now: () => number): SimTransactionalProducer {
    const epoch = (this.#epochs.get(id) ?? -1) + 1;
    this.#epochs.set(id, epoch);
    return new SimTransactionalProducer(this, id, epoch, now);
  }

  /** @internal */
  currentEpoch(id: string): number | undefined {
    return this.#epochs.get(id);
  }

  /**
   * A `KafkaClient` for one worker: only what a task and its restore use. `now` stamps records
   * sent without a timestamp (the driver's wall clock).
   */
  client(now: () => number): KafkaClient {
    const admin = new SimAdmin(this);
    const client = {
      admin: async () => admin,
      transactionalProducer: async (id: string) => this.transactionalProducer(id, now),
      plainProducer: async () => ({
        send: async (records: TopicRecords) => this.write(records, now()),
        close: async () => undefined,
      }),
      partitionReader: () => new SimPartitionReader(this),
      close: async () => undefined,
    };
    // The task and the restore are typed against the real client; this one has the same shape
    // for every method they call (see the classes below), and no other.
    return client as unknown as KafkaClient;
  }
}

/** `TransactionalProducer` over the simulated log: one commit writes everything or nothing. */
export class SimTransactionalProducer {
  readonly id: string;
  readonly #kafka: SimulatedKafka;
  readonly #epoch: number;
  readonly #now: () => number;
  #closed = false;

  constructor(kafka: SimulatedKafka, id: string, epoch: number, now: () => number) {
    this.#kafka = kafka;
    this.id = id;
    this.#epoch = epoch;
    this.#now = now;
  }

  get inTransaction(): boolean {
    return false;
  }

  async fence(): Promise<void> {}

  /** Nothing to begin ahead: a simulated commit is one step. */
  begin(_commitIntervalMs: number): void {}

  async commitTransaction(
    records: TopicRecords,
    offsets: { groupId: string; offsets: readonly TopicPartitionOffset[] },
  ): Promise<WrittenOffsets> {
    if (this.#closed) throw new Error(`simulated Kafka: producer ${this.id} is closed`);
    if (this.#kafka.currentEpoch(this.id) !== this.#epoch) throw new SimulatedFencedError(this.id);
    const fail = this.#kafka.failNextCommit;
    if (fail) {
      this.#kafka.failNextCommit = undefined;
      throw fail;
    }
    const written = this.#kafka.write(records, this.#now());
    this.#kafka.commitOffsets(offsets.groupId, offsets.offsets);
    this.#kafka.commits++;
    return written;
  }

  async close(): Promise<void> {
    this.#closed = true;
  }
}

/** `KafkaAdmin`: topics, offsets and committed offsets of the simulated cluster. */
class SimAdmin {
  readonly #k: SimulatedKafka;
  constructor(k: SimulatedKafka) {
    this.#k = k;
  }
  async listTopics(): Promise<string[]> {
    return this.#k.topics();
  }
  async partitionCounts(topics: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (const t of topics) if (this.#k.hasTopic(t)) out.set(t, this.#k.partitionCount(t));
    return out;
  }
  /** One simulated broker. */
  async brokerCount(): Promise<number> {
    return 1;
  }
  async ensureTopics(specs: readonly TopicSpec[]): Promise<string[]> {
    const created: string[] = [];
    for (const s of specs) {
      if (this.#k.hasTopic(s.topic)) continue;
      this.#k.createTopic(s.topic, s.partitions, s.config);
      created.push(s.topic);
    }
    return created;
  }
  async offsets(topic: string): Promise<Array<{ partition: number; high: string; low: string }>> {
    const n = this.#k.partitionCount(topic);
    return Array.from({ length: n }, (_, partition) => ({
      partition,
      low: '0',
      high: this.#k.endOffset(topic, partition).toString(),
    }));
  }
  async committedOffsets(groupId: string, topics: readonly string[]): Promise<TopicPartitionOffset[]> {
    const out: TopicPartitionOffset[] = [];
    for (const topic of topics) {
      if (!this.#k.hasTopic(topic)) continue;
      for (let partition = 0; partition < this.#k.partitionCount(topic); partition++) {
        const c = this.#k.committed(groupId, topic, partition);
        out.push({ topic, partition, offset: c?.offset ?? '-1', metadata: c?.metadata ?? null });
      }
    }
    return out;
  }
  /** The simulated log commits offsets at once: every committed offset is stable. */
  async committedOffsetsStable(
    groupId: string,
    tps: ReadonlyArray<{ topic: string; partitions: readonly number[] }>,
  ): Promise<TopicPartitionOffset[]> {
    const all = await this.committedOffsets(
      groupId,
      tps.map((t) => t.topic),
    );
    return all.filter((o) => tps.some((t) => t.topic === o.topic && t.partitions.includes(o.partition)));
  }
  async close(): Promise<void> {}
}

/** `PartitionReader`: reads a partition of the simulated log (committed records only). */
class SimPartitionReader {
  readonly #k: SimulatedKafka;
  constructor(k: SimulatedKafka) {
    this.#k = k;
  }
  async endOffsets(topic: string, partition: number): Promise<{ low: bigint; high: bigint }> {
    return { low: 0n, high: this.#k.endOffset(topic, partition) };
  }
  async read(o: {
    topic: string;
    partition: number;
    from: bigint;
    to: bigint;
    onRecords(records: InRecord[]): void | Promise<void>;
  }): Promise<number> {
    const rs = this.#k.read(o.topic, o.partition, o.from).filter((r) => BigInt(r.offset) < o.to);
    if (rs.length > 0) await o.onRecords(rs);
    return rs.length;
  }
  async close(): Promise<void> {}
}
