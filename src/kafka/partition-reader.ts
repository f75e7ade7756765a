import './kafkajs-preload.js';
import { createRequire } from 'node:module';
import type { Kafka } from 'kafkajs';
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

  /** Returns the number of records delivered. */
  async read(o: PartitionReadOptions): Promise<number> {
    if (o.from >= o.to) return 0;
    await this.#connect(o.topic);
    let offset = o.from;
    let delivered = 0;
    let emptyRounds = 0;
    while (offset < o.to) {
      if (o.signal?.aborted) throw new Error('restore aborted');
      const leaders = this.#cluster.findLeaderForPartitions(o.topic, [o.partition]) as Record<
        string,
        number[]
      >;
      const nodeId = Object.keys(leaders)[0];
      if (nodeId === undefined) {
        await this.#cluster.refreshMetadata();
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
        emptyRounds = 0;
      } else {
        // Nothing at this offset (a gap left by compaction or a transaction marker beyond the
        // last stable offset): stop when the log has nothing more for us below `to`.
        const lso = BigInt(pd.lastStableOffset ?? pd.highWatermark ?? '0');
        if (lso <= offset || ++emptyRounds > 50) break;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    return delivered;
  }

  async close(): Promise<void> {
    if (this.#connected) await this.#cluster.disconnect();
    this.#connected = false;
  }
}
