import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { readCommittedWithJava } from '../../bench/java-reader.js';
import { startProxiedCluster, type TestCluster } from '../helpers/cluster.js';
import { brokers, jobTopics, type ReadRecord, testKafka } from '../helpers/kafka.js';
import { assertExactRunningSums, describeShortfall, RunningSumInput } from '../helpers/running-sum.js';
import type { TcpProxy } from '../helpers/tcp-proxy.js';
import { allTasksRunning, spawnWorker, workerGroup } from '../helpers/workers.js';

/**
 * A slow link that stays below the timeouts, on a 3-node cluster: one of 3 workers (running sum,
 * exactly-once) reaches the brokers through TCP proxies that delay every chunk by
 * TEST_SLOW_LINK_MS (default 50 ms) each way, for TEST_SLOW_LINK_SECONDS (default 30) of input.
 * No rebalance may happen (no worker logs a new assignment, none is fenced), the slow worker keeps
 * its tasks, and the output (Kafka's own console consumer, read_committed) is exact.
 */
const LATENCY_MS = Number(process.env.TEST_SLOW_LINK_MS ?? 50);
/** A control run: every worker straight to the brokers, no proxy (the delay check is skipped). */
const DIRECT = process.env.TEST_SLOW_LINK_DIRECT === '1';
const SECONDS = Number(process.env.TEST_SLOW_LINK_SECONDS ?? 30);
const PARTITIONS = 6;
const RATE = 500;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let cluster: TestCluster;
let proxies: TcpProxy[];
let proxiedBrokers: string[];
before(
  async () => {
    ({ cluster, proxies, proxiedBrokers } = await startProxiedCluster());
  },
  { timeout: 240_000 },
);
after(async () => {
  for (const p of proxies ?? []) await p.cut();
  await cluster?.stop();
});

test('a slow link below the timeouts should cause no rebalance and leave the output exact', {
  timeout: 400_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-slow-link', PARTITIONS);
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
  const workers = Array.from({ length: 3 }, (_, i) =>
    group.add(
      spawnWorker('running-sum', {
        name: `w${i}`,
        stateDir: mkdtempSync(join(tmpdir(), `sluice-slow-${i}-`)),
        env: i === 2 && !DIRECT ? { ...env, KAFKA_BROKERS: proxiedBrokers.join(',') } : env,
        args,
      }),
    ),
  );
  const slow = workers[2]!;
  const gen = new RunningSumInput({ seed: 5, keys: 500 });
  await group.step('all workers own running tasks', async () => {
    for (;;) {
      const ok = await Promise.all(workers.map((w) => allTasksRunning(w).catch(() => false)));
      if (ok.every(Boolean)) return;
      await sleep(500);
    }
  });
  // Settle: the group is stable once no assignment came for a few seconds.
  await sleep(5000);
  const tasksBefore = ((await slow.status()).tasks as Array<{ id: string }>).map((x) => x.id).sort();
  const marks = workers.map((w) => w.logs.length);
  for (const p of proxies) p.latencyMs = LATENCY_MS;
  const producer = testKafka().producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    for (let i = 0; i < SECONDS * 4; i++) {
      await producer.send({ topic: input, acks: -1, messages: gen.next(RATE / 4) });
      await sleep(250);
    }
  } finally {
    await producer.disconnect();
  }
  let out: ReadRecord[] = [];
  const t0 = Date.now();
  while (Date.now() - t0 < 180_000) {
    const java = await readCommittedWithJava(brokers().join(','), output, { withValues: true });
    out = java.map((r) => ({
      key: null,
      value: r.value,
      partition: r.partition,
      offset: String(r.offset),
      headers: r.headers,
    }));
    if (out.length >= gen.count) break;
    await sleep(3000);
  }
  const delayed = proxies.reduce((n, p) => n + p.delayed, 0);
  const rebalances = workers.flatMap((w, i) =>
    w.logs.slice(marks[i]).filter((l) => l.includes('"msg":"assignment"') || l.includes('task migrated')),
  );
  const tasksAfter = ((await slow.status()).tasks as Array<{ id: string }>).map((x) => x.id).sort();
  t.diagnostic(
    `${gen.count} records; ${delayed} chunks delayed ${LATENCY_MS} ms; slow worker's tasks ${tasksAfter.join(',')}`,
  );
  if (out.length !== gen.count) {
    t.diagnostic(describeShortfall(out, gen.expected));
    const seen = new Set<string>();
    const twice = out.filter(
      (r) => seen.has(`${r.partition}@${r.offset}`) || !seen.add(`${r.partition}@${r.offset}`),
    );
    t.diagnostic(`records the reader returned twice (same partition and offset): ${twice.length}`);
    t.diagnostic(`rebalances or fencing while slow: ${rebalances.length}`);
    for (const w of workers) {
      const own = w.logs.filter((l) => !l.includes('"component":"kafkajs"'));
      console.error(`--- ${w.name} ---\n${own.slice(-40).join('\n')}`);
    }
  }
  assertExactRunningSums(out, gen.expected);
  if (!DIRECT)
    assert.ok(delayed > 1000, `the slow worker's traffic went through the delay (${delayed} chunks)`);
  assert.deepEqual(rebalances, [], 'no rebalance and no fencing while the link was slow');
  assert.deepEqual(tasksAfter, tasksBefore, 'the slow worker kept its tasks');
});
