/**
 * Kafka I/O of the bench driver: producing the inputs before timing (the latency bench's
 * fixed-rate input is bench/rate-producer.ts, a process of its own), watching output high-water
 * marks, a group's committed offsets and lag, counting committed outputs, and read_committed
 * observers that measure end-to-end latency from the output records' timestamps (both systems
 * give an output the timestamp of the input record that caused it).
 */
import type { Consumer } from 'kafkajs';
import { testKafka, withAdmin } from '../../test/helpers/kafka.js';

type Msg = { key: string; value: string; timestamp?: string };

/**
 * Produces n records, acks=all, in batches of 10k, one send at a time: kafkajs may write
 * concurrent sends in either order, and then each system of a comparison would read a different
 * interleaving of the same records (different late records in the window workload, different
 * running sums). Returns seconds taken.
 */
export async function produceFast(
  topic: string,
  n: number,
  make: (i: number) => Msg,
  from = 0,
): Promise<number> {
  const started = performance.now();
  const p = testKafka().producer({ allowAutoTopicCreation: false });
  await p.connect();
  try {
    const BATCH = 10_000;
    for (let i = from; i < from + n; i += BATCH) {
      const messages: Msg[] = [];
      for (let j = i; j < Math.min(from + n, i + BATCH); j++) messages.push(make(j));
      await p.send({ topic, acks: -1, messages });
    }
  } finally {
    await p.disconnect();
  }
  return (performance.now() - started) / 1000;
}

/** Sum of the high-water marks of a topic's partitions. */
export async function endOffsets(topic: string): Promise<Map<number, number>> {
  return withAdmin(async (a) => {
    const r = await a.fetchTopicOffsets(topic);
    return new Map(r.map((p) => [p.partition, Number(p.high)]));
  });
}

export const sum = (m: Map<number, number>) => [...m.values()].reduce((a, b) => a + b, 0);

/**
 * A long-lived admin connection for polling (one connection instead of one per poll). A failed
 * call (a topic not yet known to the broker, a loaded machine) reads as "not there yet":
 * `high` gives -1 and `lag` gives Infinity, and the caller polls again.
 */
export async function poller() {
  const a = testKafka().admin();
  await a.connect();
  return {
    async high(topic: string): Promise<number> {
      try {
        const r = await a.fetchTopicOffsets(topic);
        return r.reduce((s, p) => s + Number(p.high), 0);
      } catch {
        return -1;
      }
    },
    /** Sum over the partitions of `topics` of `groupId`'s committed offsets (none = 0; failure = -1). */
    async committed(groupId: string, topics: string[]): Promise<number> {
      try {
        const r = await a.fetchOffsets({ groupId, topics });
        let n = 0;
        for (const t of r) for (const p of t.partitions) n += Math.max(0, Number(p.offset));
        return n;
      } catch {
        return -1;
      }
    },
    /** Records of `topics` not yet committed by `groupId` (-1 = nothing committed yet). */
    async lag(groupId: string, topics: string[]): Promise<number> {
      try {
        let lag = 0;
        const committed = await a.fetchOffsets({ groupId, topics });
        for (const t of committed) {
          const ends = await a.fetchTopicOffsets(t.topic);
          for (const e of ends) {
            const c = t.partitions.find((p) => p.partition === e.partition);
            const off = c && Number(c.offset) >= 0 ? Number(c.offset) : Number(e.low);
            lag += Math.max(0, Number(e.high) - off);
          }
        }
        return lag;
      } catch {
        return Number.POSITIVE_INFINITY;
      }
    },
    /** Waits until the broker answers for every topic (its metadata has spread). */
    async waitFor(topics: string[], timeoutMs = 30_000): Promise<void> {
      const t0 = Date.now();
      for (const t of topics)
        while ((await this.high(t)) < 0) {
          if (Date.now() - t0 > timeoutMs) throw new Error(`topic ${t} not available after ${timeoutMs} ms`);
          await new Promise((r) => setTimeout(r, 200));
        }
    },
    close: () => a.disconnect(),
  };
}

/**
 * Reads `topic` (read_committed) from the given per-partition offsets and keeps, for every record
 * whose timestamp is ≥ `sinceMs`, the delay from its timestamp to now.
 */
export async function observe(
  topic: string,
  groupId: string,
  startAt: Map<number, number>,
  sinceMs: number,
): Promise<{ latencies: number[]; count: () => number; firstAt: () => number; stop: () => Promise<void> }> {
  await withAdmin((a) =>
    a.setOffsets({
      groupId,
      topic,
      partitions: [...startAt].map(([partition, offset]) => ({ partition, offset: String(offset) })),
    }),
  );
  const c: Consumer = testKafka().consumer({ groupId, readUncommitted: false, maxWaitTimeInMs: 50 });
  const latencies: number[] = [];
  let n = 0;
  let first = 0;
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  await c.run({
    eachBatch: async ({ batch }) => {
      const now = Date.now();
      for (const m of batch.messages) {
        n++;
        if (!first) first = performance.now();
        const ts = Number(m.timestamp);
        if (ts >= sinceMs) latencies.push(now - ts);
      }
    },
  });
  return {
    latencies,
    count: () => n,
    firstAt: () => first,
    stop: () => c.disconnect(),
  };
}

export { percentile } from './steady.js';

/**
 * The committed records of `topic` (read_committed, kafkajs with the fixed aborted-transaction
 * filter; control records are not counted): reads from the beginning until no record has come
 * for `idleMs` across at least three fetches. Outputs are counted once a run has finished.
 */
export async function countCommitted(topic: string, groupId: string, idleMs = 1500): Promise<number> {
  const c: Consumer = testKafka().consumer({ groupId, readUncommitted: false, maxWaitTimeInMs: 100 });
  let n = 0;
  let lastAt = performance.now();
  let fetchesSince = 0;
  c.on(c.events.FETCH, () => {
    fetchesSince++;
  });
  await c.connect();
  try {
    await c.subscribe({ topic, fromBeginning: true });
    await c.run({
      eachBatch: async ({ batch }) => {
        if (batch.messages.length === 0) return;
        n += batch.messages.length;
        lastAt = performance.now();
        fetchesSince = 0;
      },
    });
    const t0 = performance.now();
    while (!(performance.now() - lastAt >= idleMs && fetchesSince >= 3)) {
      if (performance.now() - t0 > 10 * 60_000) throw new Error(`counting ${topic} timed out at ${n}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return n;
  } finally {
    await c.disconnect();
  }
}

/**
 * A read_committed reader of `topic` from its beginning that keeps, for every record, when it was
 * received (performance.now()) and its delay from its record timestamp (Date.now() − timestamp;
 * both systems give an output its input's timestamp). `joined` resolves once it has partitions.
 */
export async function observeAll(
  topic: string,
  groupId: string,
): Promise<{
  receivedAt: number[];
  latencies: number[];
  joined: Promise<void>;
  firstAt: () => number;
  stop: () => Promise<void>;
}> {
  const c: Consumer = testKafka().consumer({ groupId, readUncommitted: false, maxWaitTimeInMs: 50 });
  const receivedAt: number[] = [];
  const latencies: number[] = [];
  let first = 0;
  const joined = new Promise<void>((r) => c.on(c.events.GROUP_JOIN, () => r()));
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  await c.run({
    eachBatch: async ({ batch }) => {
      const now = Date.now();
      const at = performance.now();
      for (const m of batch.messages) {
        if (!first) first = at;
        receivedAt.push(at);
        latencies.push(now - Number(m.timestamp));
      }
    },
  });
  return { receivedAt, latencies, joined, firstAt: () => first, stop: () => c.disconnect() };
}
