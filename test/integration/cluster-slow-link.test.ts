import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fileProxiedCluster } from '../helpers/cluster.js';
import { jobTopics, testKafka } from '../helpers/kafka.js';
import { assertExactOutput, RunningSumInput } from '../helpers/running-sum.js';
import {
  exactlyOnceArgs,
  ownedTasks,
  spawnWorkers,
  waitForStableGroup,
  workerGroup,
} from '../helpers/workers.js';

/**
 * A slow link that stays below the timeouts, on a 3-node cluster: one of 3 workers (running sum,
 * exactly-once) reaches the brokers through TCP proxies that delay every chunk by
 * TEST_SLOW_LINK_MS (default 50 ms) each way, for TEST_SLOW_LINK_SECONDS of input (default 15; the
 * long run in test/cluster-faults: 30).
 * No rebalance may happen (no worker logs a new assignment, none is fenced), the slow worker keeps
 * its tasks, and the output (Kafka's own console consumer, read_committed) is exact.
 */
const LATENCY_MS = Number(process.env.TEST_SLOW_LINK_MS ?? 50);
/** A control run: every worker straight to the brokers, no proxy (the delay check is skipped). */
const DIRECT = process.env.TEST_SLOW_LINK_DIRECT === '1';
const SECONDS = Number(process.env.TEST_SLOW_LINK_SECONDS ?? 15);
const PARTITIONS = 6;
const RATE = 500;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const proxied = fileProxiedCluster();

test('a slow link below the timeouts should cause no rebalance and leave the output exact', {
  timeout: 300_000,
}, async (t) => {
  const { proxies, proxiedBrokers } = proxied();
  const { id, input, output, env } = await jobTopics('t-slow-link', PARTITIONS);
  const group = workerGroup(t, id);
  const workers = spawnWorkers(group, 3, {
    prefix: 'slow',
    env,
    args: exactlyOnceArgs(10_000),
    envOf: (i) => (i === 2 && !DIRECT ? { ...env, KAFKA_BROKERS: proxiedBrokers.join(',') } : env),
  });
  const slow = workers[2]!;
  const gen = new RunningSumInput({ seed: 5, keys: 500 });
  // Settled first: the group Stable, every task running, no assignment for a few seconds.
  const settled = await group.step('the group is settled', () =>
    waitForStableGroup(id, workers, { quietMs: 5000 }),
  );
  t.diagnostic(`settling: ${settled}`);
  const tasksBefore = (await ownedTasks(slow)).sort();
  const marks = workers.map((w) => w.logMark());
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
  // Until the output is read in full, the link stays slow.
  const rebalances = () =>
    workers.flatMap((w, i) =>
      w.logsSince(marks[i]!).filter((l) => l.includes('"msg":"assignment"') || l.includes('task migrated')),
    );
  await assertExactOutput(t, {
    output,
    input: gen,
    workers,
    inputTopic: input,
    group: id,
    timeoutMs: 180_000,
    // (Records the reader returned twice are in assertExactOutput's own diagnostics.)
    diagnose: () => {
      t.diagnostic(`rebalances or fencing while slow: ${rebalances().length}`);
    },
  });
  const tasksAfter = (await ownedTasks(slow)).sort();
  const delayed = proxies.reduce((n, p) => n + p.delayed, 0);
  t.diagnostic(
    `${gen.count} records; ${delayed} chunks delayed ${LATENCY_MS} ms; slow worker's tasks ${tasksAfter.join(',')}`,
  );
  if (!DIRECT)
    assert.ok(delayed > 1000, `the slow worker's traffic went through the delay (${delayed} chunks)`);
  assert.deepEqual(rebalances(), [], 'no rebalance and no fencing while the link was slow');
  assert.deepEqual(tasksAfter, tasksBefore, 'the slow worker kept its tasks');
});
