import './kafkajs-preload.js';
import type { Consumer, Kafka } from 'kafkajs';
import { WATERMARK_HEADER } from './types.js';

export interface TailedRecord {
  topic: string;
  partition: number;
  offset: string;
  timestamp: string;
  key: Buffer | null;
  value: Buffer | null;
}

export interface TailOptions {
  topic: string;
  /** Only records of committed transactions (and non-transactional ones). */
  readCommitted: boolean;
  /** From each partition's start; else only records written from now on. */
  fromBeginning: boolean;
}

/**
 * Reads a topic for a person watching it (`sluice tail`): a consumer of its own throwaway group
 * that commits nothing and is deleted when it stops, so it moves no job's offsets.
 */
export class TopicTail {
  readonly #kafka: Kafka;
  readonly #groupId = `sluice-tail-${process.pid}-${Date.now().toString(36)}`;
  #consumer: Consumer | undefined;

  constructor(kafka: Kafka) {
    this.#kafka = kafka;
  }

  /** Starts reading; `onRecord` is called for each record in offset order per partition. */
  async start(o: TailOptions, onRecord: (r: TailedRecord) => void): Promise<void> {
    const c = this.#kafka.consumer({
      groupId: this.#groupId,
      readUncommitted: !o.readCommitted,
      allowAutoTopicCreation: false,
    });
    this.#consumer = c;
    await c.connect();
    await c.subscribe({ topic: o.topic, fromBeginning: o.fromBeginning });
    await c.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        // A repartition topic's watermark control record (Sluice's own, no value): not data.
        if (message.value === null && message.headers?.[WATERMARK_HEADER] !== undefined) return;
        onRecord({
          topic,
          partition,
          offset: message.offset,
          timestamp: message.timestamp,
          key: message.key ?? null,
          value: message.value ?? null,
        });
      },
    });
  }

  /** Stops reading and deletes the tail's group (best effort: an empty group expires anyway). */
  async stop(): Promise<void> {
    const c = this.#consumer;
    this.#consumer = undefined;
    if (!c) return;
    await c.disconnect();
    const admin = this.#kafka.admin();
    try {
      await admin.connect();
      await admin.deleteGroups([this.#groupId]);
    } catch {
      // Already gone, or the broker is: nothing was committed either way.
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }
}
