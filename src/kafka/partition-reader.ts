import './kafkajs-preload.js';
import { createRequire } from 'node:module';
import type { Kafka } from 'kafkajs';
import { SluiceError } from '../errors.js';
import type { InRecord } from './types.js';

/*
 * kafkajs has no manual partition assignment (every consumer is a group member), yet restoring a
 * task means "read partition p of the changelog from offset o to its end", now, without joining a
 * group. So this reader drives kafkajs's own cluster and Fetch request directly, and filters
 * aborted transactions and control records with kafkajs's Batch, exactly as its consumer does.
 * These are kafkajs internals of the pinned 2.2.x; they stay in this one file.
 */
const require = createRequire(import.meta.url);
const Batch = require('kafkajs/src/consumer/batch') as new (
  topic: string,
  fetchedOffset: string,
  partitionData: any,
) => { messages: InRecord[]; isEmpty(): boolean; lastOffset(): string };

const READ_UNCOMMITTED = 0;
const READ_COMMITTED = 1;
/** A kafkajs cluster of its own (connections, metadata), outside any producer, consumer or admin. */
export const createKafkajsCluster = (kafka: Kafka) => {
  const sym = Object.getOwnPropertySymbols(kafka).find(
    (s) => s.description === 'private:Kafka:createCluster',
  );
  if (!sym) throw new Error('kafkajs internals changed: cannot create a cluster for the partition reader');
  return (kafka as any)[sym]({ isolationLevel: READ_COMMITTED, allowAutoTopicCreation: false });
};

export interface PartitionReadOptions {
  topic: string;
  partition: number;
  /** First offset to read. */
  from: bigint;
  /** Stop once this offset is reached (exclusive); usually the partition's end when reading began. */
  to: bigint;
  /** Called per fetched batch, in order. */
  onRecords(records: InRecord[]): void | Promise<void>;
  maxBytes?: number;
  signal?: AbortSignal;
  /** How long the log may make no progress below `to` before the read fails (default 30 s). */
  stallTimeoutMs?: number;
}

/**
 * How long a read waits for the log to move past an offset below its end. A restore reads up to
 * the end offset taken after the task's fence, when no transaction of an earlier owner can be
 * open any more, so a stall means something is wrong (a foreign transactional writer, a log
 * truncated under the reader); it must fail rather than call a partial state restored. The
 * value is generous against a broker that is slow to write the markers of the fenced
 * transaction; the task's init is retried with backoff after it.
 */
const DEFAULT_STALL_MS = 30_000;

/** A partition read could not reach its end offset. */
export class RestoreIncompleteError extends SluiceError {
  constructor(o: PartitionReadOptions, reached: bigint, why: string) {
    super(
      'SLUICE_RESTORE_INCOMPLETE',
      `cannot read ${o.topic}/${o.partition} to offset ${o.to}: stopped at ${reached} (${why})`,
      { retriable: true },
    );
  }
}

/** Reads one partition from an offset to an end offset with read_committed, outside any group. */
export class PartitionReader {
  readonly #cluster: any;
  #connected = false;

  constructor(kafka: Kafka) {
    this.#cluster = createKafkajsCluster(kafka);
  }

  async #connect(topic: string): Promise<void> {
    if (!this.#connected) {
      await this.#cluster.connect();
      this.#connected = true;
    }
    await this.#cluster.addTargetTopic(topic);
  }

  /**
   * The partition's log start and log end (high watermark, read_uncommitted): the end a restore
   * must reach. The admin's offsets are read_committed in kafkajs, i.e. the last stable offset,
   * which an open transaction holds back; a restore that stopped there would call state
   * restored that lacks what that transaction commits a moment later.
   */
  async endOffsets(topic: string, partition: number): Promise<{ low: bigint; high: bigint }> {
    await this.#connect(topic);
    const list = async (timestamp: number): Promise<bigint> => {
      for (let attempt = 0; ; attempt++) {
        const leaders = this.#cluster.findLeaderForPartitions(topic, [partition]) as Record<string, number[]>;
        const nodeId = Object.keys(leaders)[0];
        try {
          if (nodeId === undefined) throw new Error(`no leader for ${topic}/${partition}`);
          const broker = await this.#cluster.findBroker({ nodeId });
          const r = await broker.listOffsets({
            replicaId: -1,
            isolationLevel: READ_UNCOMMITTED,
            topics: [{ topic, partitions: [{ partition, timestamp }] }],
          });
          const p = r.responses?.[0]?.partitions?.[0];
          if (!p || (p.errorCode && p.errorCode !== 0))
            throw new Error(`list offsets ${topic}/${partition} failed with error code ${p?.errorCode}`);
          return BigInt(p.offset);
        } catch (e) {
          if (attempt >= 10) throw e;
          await this.#cluster.refreshMetadata().catch(() => undefined);
          await new Promise((r) => setTimeout(r, 200 * (attempt + 1)));
        }
      }
    };
    const [low, high] = await Promise.all([list(-2), list(-1)]);
    return { low, high };
  }

  /**
   * Reads `[from, to)` and returns the number of records delivered. It returns only once every
   * offset below `to` was passed (records, control records, aborted data and compaction gaps
   * alike); when the log makes no progress for `stallTimeoutMs` (an open transaction holding
   * the last stable offset below `to`, a log truncated under the reader), it throws
   * {@link RestoreIncompleteError} instead of pretending it got there.
   */
  async read(o: PartitionReadOptions): Promise<number> {
    if (o.from >= o.to) return 0;
    await this.#connect(o.topic);
    const stallMs = o.stallTimeoutMs ?? DEFAULT_STALL_MS;
    let offset = o.from;
    let delivered = 0;
    let progressAt = Date.now();
    let lastStable: string | undefined;
    while (offset < o.to) {
      if (o.signal?.aborted) throw new Error('restore aborted');
      const leaders = this.#cluster.findLeaderForPartitions(o.topic, [o.partition]) as Record<
        string,
        number[]
      >;
      const nodeId = Object.keys(leaders)[0];
      if (nodeId === undefined) {
        if (Date.now() - progressAt > stallMs)
          throw new RestoreIncompleteError(o, offset, `no leader for ${o.topic}/${o.partition}`);
        await this.#cluster.refreshMetadata();
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      const broker = await this.#cluster.findBroker({ nodeId });
      const response = await broker.fetch({
        replicaId: -1,
        isolationLevel: READ_COMMITTED,
        maxWaitTime: 200,
        minBytes: 1,
        maxBytes: o.maxBytes ?? 16 * 1024 * 1024,
        topics: [
          {
            topic: o.topic,
            partitions: [
              {
                partition: o.partition,
                fetchOffset: offset.toString(),
                maxBytes: o.maxBytes ?? 8 * 1024 * 1024,
              },
            ],
          },
        ],
      });
      const pd = response.responses?.[0]?.partitions?.[0];
      if (!pd) throw new Error(`no fetch answer for ${o.topic}/${o.partition}`);
      if (pd.errorCode && pd.errorCode !== 0)
        throw new Error(`fetch ${o.topic}/${o.partition}@${offset} failed with error code ${pd.errorCode}`);
      const batch = new Batch(o.topic, offset.toString(), pd);
      const records = batch.messages.filter((m) => BigInt(m.offset) < o.to);
      if (records.length > 0) {
        await o.onRecords(records);
        delivered += records.length;
      }
      // Move past everything fetched, control records and aborted data included.
      const raw = pd.messages as Array<{ offset: string }>;
      const lastRaw = raw.length > 0 ? BigInt(raw[raw.length - 1]!.offset) : undefined;
      if (lastRaw !== undefined && lastRaw >= offset) {
        offset = lastRaw + 1n;
        progressAt = Date.now();
        continue;
      }
      // Nothing readable at this offset although it lies below `to`: the last stable offset is
      // below it (a transaction still open) or the log shrank. Wait for it, not for ever.
      lastStable = String(pd.lastStableOffset ?? pd.highWatermark ?? '?');
      if (Date.now() - progressAt > stallMs)
        throw new RestoreIncompleteError(
          o,
          offset,
          `nothing readable at ${offset} for ${stallMs} ms (last stable offset ${lastStable}, high watermark ${String(pd.highWatermark)}; an open transaction holds it: if it stays, see SLUICE_RESTORE_INCOMPLETE in docs/errors.md)`,
        );
      await new Promise((r) => setTimeout(r, 50));
    }
    return delivered;
  }

  async close(): Promise<void> {
    if (this.#connected) await this.#cluster.disconnect();
    this.#connected = false;
  }
}
