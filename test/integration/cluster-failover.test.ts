import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { runFiles } from '../../src/dev/kafka-config.js';
import { fileCluster, type Leaders, leaderCounts } from '../helpers/cluster.js';
import { jobTopics, testKafka, withAdmin } from '../helpers/kafka.js';
import { assertExactOutput, RunningSumInput } from '../helpers/running-sum.js';
import { exactlyOnceArgs, spawnWorkers, workerGroup } from '../helpers/workers.js';

/**
 * Leader failover on a 3-node cluster: 3 workers run the running-sum job under exactly-once while
 * input flows; the broker that leads the most partitions of the input, the output, the changelog,
 * the repartition topic and `__transaction_state` is SIGKILLed mid-stream and started again
 * TEST_FAILOVER_DOWN_MS later (default 15 s), TEST_FAILOVER_ROUNDS times. Kafka's own console
 * consumer (read_committed) must then read every running sum exactly once, in order, with exact
 * values.
 *
 * Sized for CI (2 cores): 1 round, TEST_FAILOVER_RECORDS input records (default 15 000) in
 * TEST_FAILOVER_SLICES one-second slices (default 30). The long run in test/cluster-faults: 2
 * rounds, 30 000 records in 40 slices.
 */
const ROUNDS = Number(process.env.TEST_FAILOVER_ROUNDS ?? 1);
const N = Number(process.env.TEST_FAILOVER_RECORDS ?? 15_000);
const SLICES = Number(process.env.TEST_FAILOVER_SLICES ?? 30);
const PARTITIONS = 6;
const KEYS = 500;
const DOWN_MS = Number(process.env.TEST_FAILOVER_DOWN_MS ?? 15_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const cluster = fileCluster();

/**
 * What the brokers logged that bears on a transaction's outcome (a restarted node's log keeps its
 * lines from before the kill): a marker the coordinator skipped (it finds no leader for the
 * partition in its metadata and takes it for deleted: the records there stay in an open
 * transaction, which the same producer id's next commit on that partition would make visible),
 * ISR changes to fewer than all 3 nodes, transactions the coordinator timed out.
 */
function brokerLogFindings(dataDir: string): string {
  const patterns: Array<[string, RegExp]> = [
    ['marker skipped', /can be skipped/],
    ['ISR below 3', /ISR updated to \d+(,\d+)? +and/],
    ['txn timed out', /rollback of ongoing transaction/i],
    ['hanging', /\bhanging\b/i],
  ];
  const counts = new Map<string, number>();
  const first: string[] = [];
  for (let node = 1; node <= 3; node++) {
    let text = '';
    try {
      text = readFileSync(runFiles(join(dataDir, `node-${node}`)).logFile, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n'))
      for (const [name, re] of patterns)
        if (re.test(line)) {
          counts.set(name, (counts.get(name) ?? 0) + 1);
          if (first.length < 4 && name !== 'txn timed out') first.push(`node ${node}: ${line.slice(0, 300)}`);
        }
  }
  return `${[...counts].map(([k, n]) => `${k} ${n}`).join(', ') || 'nothing of note'}${first.length ? ` (${first.join(' | ')})` : ''}`;
}

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
  timeout: 240_000 + ROUNDS * 120_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-failover', PARTITIONS);
  const group = workerGroup(t, id);
  const workers = spawnWorkers(group, 3, { prefix: 'failover', env, args: exactlyOnceArgs(10_000) });
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
      await cluster().signal(victim.node, 'SIGKILL');
      events.push(
        `round ${round}: killed node ${victim.node} at ${at} records in, leading ${victim.leads.join(' ')}`,
      );
      await sleep(DOWN_MS);
      await group.step(`restart node ${victim.node}`, () => cluster().restart());
      events.push(`round ${round}: node ${victim.node} back at ${produced} records in`);
      await sleep(5000);
    }
    await group.step('all input produced', () => producing);
    t.diagnostic(events.join('; '));
    assert.equal(gen.count, N);
    for (const w of workers) assert.equal(w.child.exitCode, null, `${w.name} still runs`);

    await assertExactOutput(t, {
      output,
      input: gen,
      workers,
      inputTopic: input,
      group: id,
      timeoutMs: 240_000,
      // Input the test's own producer lost or wrote twice (an idempotent kafkajs producer across
      // a leader election) is in assertExactOutput's diagnostics (inputTopic).
      diagnose: async () => {
        for (const w of workers) {
          const st = await w.status().catch((e: Error) => ({ error: e.message }));
          t.diagnostic(`${w.name} status: ${JSON.stringify(st).slice(0, 3000)}`);
        }
        return `${events.join('; ')}; brokers: ${brokerLogFindings(cluster().dataDir)}`;
      },
    });
  } finally {
    await producer.disconnect().catch(() => undefined);
  }
});
