import type { BatchBuilder } from './record-batch.js';

/**
 * The record shapes the rest of Sluice sees. They match kafkajs's message objects structurally,
 * so the consumer path hands kafkajs's objects through without copying them.
 */
export type Headers = Record<string, Buffer | string | (Buffer | string)[] | undefined>;

/**
 * The header of a watermark control record in a repartition topic (`writer/writers/watermark`:
 * the upstream task's partition, the upstream partition count, its watermark in ms). Such a record
 * has no key and no value; it never reaches an operator, and `sluice tail` skips it.
 */
export const WATERMARK_HEADER = 'sluice.watermark';

export interface InRecord {
  key: Buffer | null;
  value: Buffer | null;
  /** Offset as a decimal string (kafkajs keeps 64-bit offsets as strings). */
  offset: string;
  /** Milliseconds since the epoch, as a decimal string. */
  timestamp: string;
  headers?: Headers;
}

export interface OutRecord {
  key: Buffer | null;
  value: Buffer | null;
  /** Set for changelogs (the task's partition); else the key's murmur2 hash picks it, as in Java clients. */
  partition?: number;
  timestamp?: string;
  headers?: Headers;
  /**
   * Records the collector wrote ahead into one partition's batch (record-batch.ts): the entry
   * stands for all of them, has no key or value of its own, and names their partition.
   */
  batch?: BatchBuilder;
}

export interface TopicPartitionOffset {
  topic: string;
  partition: number;
  /** The next offset to read. */
  offset: string;
  /** Committed with the offset (a task keeps its partition's event time here, as Kafka Streams does). */
  metadata?: string | null;
}

export interface TopicSpec {
  topic: string;
  partitions: number;
  /** Extra topic configs, e.g. `{ 'cleanup.policy': 'compact' }`. */
  config?: Record<string, string>;
  /** Copies of each partition; absent: the broker's default.replication.factor. */
  replicationFactor?: number;
}

export interface KafkaSettings {
  brokers: readonly string[];
  clientId: string;
  requestTimeoutMs: number;
  sessionTimeoutMs: number;
  heartbeatIntervalMs: number;
  /** How long an at-least-once request waits for more records (`kafka.lingerMs`); 0 when unset. */
  lingerMs?: number;
  /** TLS: paths to PEM files (read once, when the client is made). */
  ssl?: {
    enabled: boolean;
    ca?: string | undefined;
    cert?: string | undefined;
    key?: string | undefined;
    rejectUnauthorized: boolean;
  };
  sasl?: {
    mechanism?: 'plain' | 'scram-sha-256' | 'scram-sha-512' | undefined;
    username?: string | undefined;
    password?: string | undefined;
  };
}

/**
 * A group member's place in its group (the Java consumer's `ConsumerGroupMetadata`): an
 * exactly-once v2 TxnOffsetCommit carries it, and the coordinator refuses one whose generation or
 * member id is no longer current (KIP-447), which fences a worker that lost its tasks.
 */
export interface GroupMetadata {
  generationId: number;
  memberId: string;
  groupInstanceId: string | null;
}
