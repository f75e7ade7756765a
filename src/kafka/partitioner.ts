/**
 * Kafka's default key partitioner (Java's `Utils.murmur2` and `toPositive(hash) % partitions`), the
 * one kafkajs's DefaultPartitioner uses for our repartition topics. State queries use it to find
 * the partition, hence the task and the worker, that holds a key.
 */
import { randomBytes } from 'node:crypto';

export function murmur2(data: Buffer): number {
  const length = data.length;
  const seed = 0x9747b28c;
  const m = 0x5bd1e995;
  let h = seed ^ length;
  const length4 = length >>> 2;
  for (let i = 0; i < length4; i++) {
    const i4 = i * 4;
    let k =
      (data[i4]! & 0xff) |
      ((data[i4 + 1]! & 0xff) << 8) |
      ((data[i4 + 2]! & 0xff) << 16) |
      ((data[i4 + 3]! & 0xff) << 24);
    k = Math.imul(k, m);
    k ^= k >>> 24;
    k = Math.imul(k, m);
    h = Math.imul(h, m);
    h ^= k;
  }
  const tail = length & ~3;
  // The tail bytes, as Java's switch with fall-through mixes them in.
  const rest = length % 4;
  if (rest >= 3) h ^= (data[tail + 2]! & 0xff) << 16;
  if (rest >= 2) h ^= (data[tail + 1]! & 0xff) << 8;
  if (rest >= 1) {
    h ^= data[tail]! & 0xff;
    h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}

/** The partition Kafka's default partitioner picks for a non-null key. */
export function partitionForKey(key: Buffer, partitions: number): number {
  return (murmur2(key) & 0x7fffffff) % partitions;
}

/**
 * The partition the producer's partitioner ({@link createKeyPartitioner}) picks for a message's
 * non-null key, whatever its type (a serde written in plain JS may return a string): one function,
 * so that a record counted in a partition before it is sent (producer.ts `toSends`) goes there.
 */
export function partitionOfKey(key: Buffer | string | Uint8Array, partitions: number): number {
  return partitionForKey(Buffer.isBuffer(key) ? key : Buffer.from(String(key)), partitions);
}

interface PartitionArgs {
  topic: string;
  partitionMetadata: ReadonlyArray<{ partitionId: number; leader: number }>;
  message: { partition?: number | null; key?: Buffer | string | null };
}

/**
 * kafkajs 2's DefaultPartitioner (Java's): the message's partition when it names one, else the
 * key's murmur2 hash, else round robin over the partitions that have a leader. The same choices,
 * without its per-message costs, which were about 5 % of a worker's busy CPU (bench/cpu.ts
 * --profile, running sum): murmur2 through 64-bit `Long` objects and a filtered copy of the
 * partition list for every message, even a keyed one.
 */
export function createKeyPartitioner(): () => (a: PartitionArgs) => number {
  return () => {
    const counters = new Map<string, number>();
    return ({ topic, partitionMetadata, message }) => {
      if (message.partition !== null && message.partition !== undefined) return message.partition;
      const n = partitionMetadata.length;
      const key = message.key;
      if (key !== null && key !== undefined) return partitionOfKey(key, n);
      const c = (counters.get(topic) ?? randomBytes(4).readUInt32BE(0)) + 1;
      counters.set(topic, c);
      const available = partitionMetadata.filter((p) => p.leader >= 0);
      if (available.length > 0) return available[(c & 0x7fffffff) % available.length]!.partitionId;
      return (c & 0x7fffffff) % n;
    };
  };
}
