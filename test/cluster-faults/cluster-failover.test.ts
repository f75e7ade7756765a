import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { readCommittedWithJava } from '../../bench/java-reader.js';
import { type Leaders, leaderCounts, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { brokers, jobTopics, type ReadRecord, testKafka, withAdmin } from '../helpers/kafka.js';
import { assertExactRunningSums, describeShortfall, RunningSumInput } from '../helpers/running-sum.js';
import { spawnWorker, type WorkerProcess, workerGroup } from '../helpers/workers.js';

/**
 * Leader failover on a 3-node cluster: 3 workers run the running-sum job under exactly-once while
 * input flows; the broker that leads the most partitions of the input, the output, the changelog,
 * the repartition topic and `__transaction_state` is SIGKILLed mid-stream and started again later,
 * TEST_FAILOVER_ROUNDS times (default 2). Kafka's own console consumer (read_committed) must then
 * read every running sum exactly once, in order, with exact values.
 *
 * Sized for CI (2 cores): TEST_FAILOVER_RECORDS input records (default 30 000) over about 40 s.
 */
const ROUNDS = Number(process.env.TEST_FAILOVER_ROUNDS ?? 2);
const N = Number(process.env.TEST_FAILOVER_RECORDS ?? 30_000);
const SLICES = 40;
const PARTITIONS = 6;
const KEYS = 500;
const DOWN_MS = Number(process.env.TEST_FAILOVER_DOWN_MS ?? 15_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let cluster: TestCluster;
before(
  async () => {
    cluster = await startTestCluster();
  },
  { timeout: 240_000 },
);
after(() => cluster?.stop());

/** Leader of every partition of `topics` (−1 when none), from the metadata. */
async function leaders(topics: string[]): Promise<Leaders> {
  return withAdmin(async (a) => {
    const md = await a.fetchTopicMetadata({ topics });
    return new Map(md.topics.map((t) => [t.name, t.partitions.map((p) => p.leader)]));
  });
}

/**
 * The node to kill: the one leading partitions of the most of these topics, then the most partitions.
 * Returns it with what it leads, for the diagnostics.
 */
function pickVictim(ls: Leaders): { node: number; leads: string[] } {
  let best = { node: 1, topics: -1, count: -1, leads: [] as string[] };
  for (let node = 1; node <= 3; node++) {
    const leads = [...ls]
      .filter(([, l]) => l.includes(node))
      .map(([t, l]) => `${t}:${l.filter((x) => x === node).length}/${l.length}`);
    const count = leaderCounts(ls).get(node) ?? 0;
    if (leads.length > best.topics || (leads.length === best.topics && count > best.count))
      best = { node, topics: leads.length, count, leads };
  }
  return { node: best.node, leads: best.leads };
}

test('exactly-once should hold when the broker leading the input, output, changelog and transaction log is killed and restarted', {
  timeout: 600_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-failover', PARTITIONS);
  const group = workerGroup(t, id);
  const args = [
    '--processing.guarantee',
    'exactly_once',
    '--kafka.sessionTimeoutMs',
    '10000',
    '--kafka.heartbeatIntervalMs',
    '1000',
    '--log-level',
    'info',
  ];
  const workers: WorkerProcess[] = Array.from({ length: 3 }, (_, i) =>
    group.add(
      spawnWorker('running-sum', {
        name: `w${i}`,
        stateDir: mkdtempSync(join(tmpdir(), `sluice-failover-${i}-`)),
        env,
        args,
      }),
    ),
  );
  const gen = new RunningSumInput({ seed: 4242, keys: KEYS });
  // An idempotent producer that rides out a leader election: its retries keep their sequence
  // numbers, so a batch retried after the leader died is written once.
  const producer = testKafka().producer({
    idempotent: true,
    maxInFlightRequests: 1,
    retry: { retries: 40, initialRetryTime: 300, maxRetryTime: 3000 },
  });
  await producer.connect();
  let produced = 0;
  const producing = (async () => {
    const per = Math.ceil(N / SLICES);
    for (let s = 0; s < SLICES; s++) {
      await producer.send({ topic: input, acks: -1, messages: gen.next(Math.min(per, N - gen.count)) });
      produced = gen.count;
      await sleep(1000);
    }
  })();
  producing.catch(() => undefined);
  const events: string[] = [];
  try {
    await group.step('all workers serve HTTP', () => Promise.all(workers.map((w) => w.url())));
    await sleep(8000);
    for (let round = 1; round <= ROUNDS; round++) {
      const topics = await withAdmin(async (a) =>
        (await a.listTopics()).filter((n) => n.startsWith(id) && /-(in|out|changelog|repartition)$/.test(n)),
      );
      const ls = await leaders([...topics, '__transaction_state', '__consumer_offsets']);
      const victim = pickVictim(ls);
      const at = produced;
      await cluster.signal(victim.node, 'SIGKILL');
      events.push(
        `round ${round}: killed node ${victim.node} at ${at} records in, leading ${victim.leads.join(' ')}`,
      );
      await sleep(DOWN_MS);
      await group.step(`restart node ${victim.node}`, () => cluster.restart());
      events.push(`round ${round}: node ${victim.node} back at ${produced} records in`);
      await sleep(5000);
    }
    await group.step('all input produced', () => producing);
    t.diagnostic(events.join('; '));
    assert.equal(gen.count, N);
    for (const w of workers) assert.equal(w.child.exitCode, null, `${w.name} still runs`);

    let out: ReadRecord[] = [];
    const t0 = Date.now();
    while (Date.now() - t0 < 240_000) {
      const java = await readCommittedWithJava(brokers().join(','), output, { withValues: true });
      out = java.map((r) => ({
        key: null,
        value: r.value,
        partition: r.partition,
        offset: String(r.offset),
        headers: r.headers,
      }));
      if (out.length >= N) break;
      await sleep(3000);
    }
    if (out.length !== N) {
      // Input lost by the test's own producer (an idempotent kafkajs producer across a leader
      // election) would look the same: count what the input topic holds.
      const stored = await readCommittedWithJava(brokers().join(','), input, { withValues: false });
      t.diagnostic(`input topic holds ${stored.length} of the ${N} records sent`);
      t.diagnostic(describeShortfall(out, gen.expected));
      for (const w of workers) {
        const st = await w.status().catch((e: Error) => ({ error: e.message }));
        t.diagnostic(`${w.name} status: ${JSON.stringify(st).slice(0, 3000)}`);
        const own = w.logs.filter((l) => !l.includes('"component":"kafkajs"'));
        console.error(`--- ${w.name} ---\n${own.slice(-40).join('\n')}`);
      }
    }
    assertExactRunningSums(out, gen.expected);
  } finally {
    await producer.disconnect().catch(() => undefined);
  }
});
