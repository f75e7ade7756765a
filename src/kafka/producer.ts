import { CompressionTypes, type Producer, type RecordMetadata, type Transaction } from 'kafkajs';
import type { OutRecord, TopicPartitionOffset } from './types.js';

export type TopicRecords = ReadonlyMap<string, OutRecord[]>;

/** Highest offset written per topic-partition by one send, from the broker's answer. */
export type WrittenOffsets = Map<string, bigint>;

function toTopicMessages(records: TopicRecords) {
  const out: Array<{ topic: string; messages: OutRecord[] }> = [];
  for (const [topic, messages] of records) if (messages.length > 0) out.push({ topic, messages });
  return out;
}

function lastOffsets(meta: RecordMetadata[], records: TopicRecords): WrittenOffsets {
  // The broker answers with the base offset of each partition's batch; count what we sent there.
  const counts = new Map<string, number>();
  for (const [topic, msgs] of records) {
    for (const m of msgs) {
      if (m.partition === undefined) continue;
      const k = `${topic}:${m.partition}`;
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
  }
  const out: WrittenOffsets = new Map();
  for (const r of meta) {
    const k = `${r.topicName}:${r.partition}`;
    const n = counts.get(k);
    if (n !== undefined && r.baseOffset !== undefined) out.set(k, BigInt(r.baseOffset) + BigInt(n) - 1n);
  }
  return out;
}

/** An idempotent producer for at-least-once: send, wait for acks=all. */
export class PlainProducer {
  readonly #p: Producer;
  constructor(p: Producer) {
    this.#p = p;
  }
  async send(records: TopicRecords): Promise<WrittenOffsets> {
    const topicMessages = toTopicMessages(records);
    if (topicMessages.length === 0) return new Map();
    const meta = await this.#p.sendBatch({ topicMessages, acks: -1, compression: CompressionTypes.None });
    return lastOffsets(meta, records);
  }
  async close(): Promise<void> {
    await this.#p.disconnect();
  }
}

/**
 * A transactional producer owned by one task. One checkpoint = one transaction:
 * outputs and changelog records, then the input offsets, then commit.
 */
export class TransactionalProducer {
  readonly id: string;
  readonly #p: Producer;
  #tx: Transaction | undefined;
  constructor(p: Producer, id: string) {
    this.#p = p;
    this.id = id;
  }

  /** Sends records and offsets in one transaction and commits it. Throws if anything fails. */
  async commitTransaction(
    records: TopicRecords,
    offsets: { groupId: string; offsets: readonly TopicPartitionOffset[] },
  ): Promise<WrittenOffsets> {
    const tx = await this.#p.transaction();
    this.#tx = tx;
    let written: WrittenOffsets = new Map();
    try {
      const topicMessages = toTopicMessages(records);
      if (topicMessages.length > 0) {
        const meta = await tx.sendBatch({ topicMessages, acks: -1, compression: CompressionTypes.None });
        written = lastOffsets(meta, records);
      }
      if (offsets.offsets.length > 0) {
        const byTopic = new Map<string, Array<{ partition: number; offset: string }>>();
        for (const o of offsets.offsets) {
          let l = byTopic.get(o.topic);
          if (!l) byTopic.set(o.topic, (l = []));
          l.push({ partition: o.partition, offset: o.offset });
        }
        await tx.sendOffsets({
          consumerGroupId: offsets.groupId,
          topics: [...byTopic].map(([topic, partitions]) => ({ topic, partitions })),
        });
      }
      await tx.commit();
      this.#tx = undefined;
      return written;
    } catch (e) {
      this.#tx = undefined;
      // The caller throws this producer away either way (a failed abort can leave kafkajs stuck
      // in ABORTING, kafkajs #469/#1355); try to abort so the next owner need not wait it out.
      await tx.abort().catch(() => undefined);
      throw e;
    }
  }

  get inTransaction(): boolean {
    return this.#tx !== undefined;
  }

  async close(): Promise<void> {
    await this.#p.disconnect().catch(() => undefined);
  }
}
