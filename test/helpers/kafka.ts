// First: the test readers use kafkajs with the fixed read_committed filter, like the workers.
import '../../src/kafka/kafkajs-preload.js';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Admin, Kafka as KafkaType, Producer } from 'kafkajs';

// Tests talk to the broker directly with kafkajs (the src/kafka boundary is for the product).
const require = createRequire(import.meta.url);
const { Kafka, logLevel } = require('kafkajs') as typeof import('kafkajs');
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

/** The suite's broker: `npm test` starts one and exports KAFKA_BROKERS. */
export function brokers(): string[] {
  const b = process.env.KAFKA_BROKERS;
  if (!b)
    throw new Error('KAFKA_BROKERS is not set: run the suite with `npm test`, which starts a local Kafka');
  return b.split(',');
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}

let kafka: KafkaType | undefined;
export function testKafka(): KafkaType {
  kafka ??= new Kafka({ brokers: brokers(), clientId: 'sluice-test', logLevel: logLevel.NOTHING });
  return kafka;
}

export async function withAdmin<T>(fn: (a: Admin) => Promise<T>): Promise<T> {
  const admin = testKafka().admin();
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.disconnect();
  }
}

export async function createTopics(
  topics: Array<{ topic: string; partitions: number; config?: Record<string, string> }>,
): Promise<void> {
  // kafkajs's wait for leaders retries LEADER_NOT_AVAILABLE only; a broker just started (or
  // loaded) may not know a topic it has just created yet and answer UNKNOWN_TOPIC_OR_PARTITION.
  for (let attempt = 1; ; attempt++) {
    try {
      return await createTopicsOnce(topics);
    } catch (e) {
      if ((e as { type?: string }).type !== 'UNKNOWN_TOPIC_OR_PARTITION' || attempt >= 5) throw e;
      await new Promise((r) => setTimeout(r, 500 * attempt));
    }
  }
}

async function createTopicsOnce(
  topics: Array<{ topic: string; partitions: number; config?: Record<string, string> }>,
): Promise<void> {
  await withAdmin((a) =>
    a.createTopics({
      waitForLeaders: true,
      topics: topics.map((t) => ({
        topic: t.topic,
        numPartitions: t.partitions,
        // No time retention: tests use synthetic event times (1970 and on), and sinks stamp records
        // with event time, so the broker's 7-day retention deleted them at its next check (every
        // 5 min): window-crash lost the first slice's window results that way, now and then.
        configEntries: Object.entries({ 'retention.ms': '-1', ...t.config }).map(([name, value]) => ({
          name,
          value,
        })),
      })),
    }),
  );
}

export async function deleteTopicsMatching(prefix: string): Promise<void> {
  await withAdmin(async (a) => {
    const topics = (await a.listTopics()).filter((t) => t.startsWith(prefix));
    if (topics.length > 0) await a.deleteTopics({ topics }).catch(() => undefined);
  });
}

export interface TestRecord {
  key: string | null;
  /** Kafka timestamp (ms since the epoch, as a string); the broker's clock when absent. */
  timestamp?: string;
  value: string | Buffer | null;
  partition?: number;
  headers?: Record<string, string>;
}

export async function produce(topic: string, records: TestRecord[], batch = 5000): Promise<void> {
  const p: Producer = testKafka().producer({ idempotent: true, maxInFlightRequests: 1 });
  await p.connect();
  try {
    for (let i = 0; i < records.length; i += batch) {
      await p.send({ topic, acks: -1, messages: records.slice(i, i + batch) });
    }
  } finally {
    await p.disconnect();
  }
}

export interface ReadRecord {
  key: string | null;
  value: string | null;
  partition: number;
  offset: string;
  headers: Record<string, string>;
}

/**
 * Reads a topic from the beginning (read_committed unless told otherwise) until `expected`
 * records arrived and nothing more came for `settleMs`, or the timeout passed.
 */
export async function readAll(
  topic: string,
  opts: { expected?: number; timeoutMs?: number; settleMs?: number; readUncommitted?: boolean } = {},
): Promise<ReadRecord[]> {
  const { expected = Number.POSITIVE_INFINITY, timeoutMs = 60_000, settleMs = 1500 } = opts;
  const consumer = testKafka().consumer({
    groupId: uniqueName('reader'),
    readUncommitted: opts.readUncommitted ?? false,
    maxWaitTimeInMs: 100,
  });
  const out: ReadRecord[] = [];
  let last = Date.now();
  // A reader that crashed (kafkajs restarts it or not) reads on from its last commit or stops: a
  // shortfall or a duplicate in a test's output may be the reader's, so say so in the test's log.
  consumer.on(consumer.events.CRASH, (e) => {
    const { error, restart } = e.payload as { error: Error; restart: boolean };
    process.stderr.write(
      `readAll(${topic}): reader crashed (restart: ${restart}): ${error?.stack ?? error}\n`,
    );
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    eachBatch: async ({ batch }) => {
      for (const m of batch.messages) {
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(m.headers ?? {})) headers[k] = String(v);
        out.push({
          key: m.key?.toString() ?? null,
          value: m.value?.toString() ?? null,
          partition: batch.partition,
          offset: m.offset,
          headers,
        });
      }
      last = Date.now();
    },
  });
  const start = Date.now();
  while (Date.now() - start < timeoutMs) {
    await new Promise((r) => setTimeout(r, 100));
    if (out.length >= expected && Date.now() - last >= settleMs) break;
    if (expected === Number.POSITIVE_INFINITY && out.length > 0 && Date.now() - last >= settleMs) break;
  }
  await consumer.disconnect();
  return out;
}

/** Waits until `fn` returns a truthy value, polling. */
export async function eventually<T>(
  fn: () => Promise<T> | T,
  opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<T> {
  const { timeoutMs = 60_000, intervalMs = 200 } = opts;
  const start = Date.now();
  let lastErr: unknown;
  while (Date.now() - start < timeoutMs) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      lastErr = e;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${opts.what ?? 'a condition'}${lastErr ? `: ${String(lastErr)}` : ''}`,
  );
}

/**
 * A fresh app id with its input and output topics (`<id>-in`, `<id>-out`), created, and the env
 * the test job files read. Delete them with `deleteTopicsMatching(id)` after the workers stop.
 */
export async function jobTopics(prefix: string, partitions: number) {
  const id = uniqueName(prefix);
  const input = `${id}-in`;
  const output = `${id}-out`;
  await createTopics([
    { topic: input, partitions },
    { topic: output, partitions },
  ]);
  return { id, input, output, env: { TEST_APP_ID: id, TEST_INPUT: input, TEST_OUTPUT: output } };
}

/**
 * A read_committed reader that notes when each output record (by its input seq) arrived, so that
 * a record's latency is measured where it happens, not by re-reading the topic.
 */
export async function arrivalClock(topic: string) {
  const arrived = new Map<number, number>();
  const c = testKafka().consumer({ groupId: uniqueName('clock'), maxWaitTimeInMs: 100 });
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  await c.run({
    eachBatch: async ({ batch }) => {
      const now = Date.now();
      for (const m of batch.messages) arrived.set(JSON.parse(m.value!.toString()).seq, now);
    },
  });
  return { arrived, stop: () => c.disconnect() };
}

/**
 * A read_committed reader that notes when each partition of `topic` received records (one time
 * per non-empty batch), for output gaps and for "has this partition moved on since t".
 */
export async function partitionArrivals(topic: string) {
  const arrivals = new Map<number, number[]>();
  const c = testKafka().consumer({ groupId: uniqueName('clock'), maxWaitTimeInMs: 100 });
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  await c.run({
    eachBatch: async ({ batch }) => {
      if (batch.messages.length === 0) return;
      let l = arrivals.get(batch.partition);
      if (!l) arrivals.set(batch.partition, (l = []));
      l.push(Date.now());
    },
  });
  return {
    arrivals,
    /** When `partition` last received records (0: never). */
    last: (partition: number) => arrivals.get(partition)?.at(-1) ?? 0,
    stop: () => c.disconnect(),
  };
}
