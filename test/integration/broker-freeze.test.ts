/**
 * A frozen broker under exactly-once: the broker's JVM is SIGSTOPped mid-stream for longer than
 * the clients' request timeout and the transaction coordinator's check interval, then SIGCONTed
 * (a broker's long GC pause, a stalled VM). Its connections stay open but answer nothing; when
 * it thaws, its timers see the time that passed all at once (sessions and transactions may
 * expire together, and the controller fences its own broker for a moment). The output must be
 * exact as Kafka's own console consumer reads it (read_committed), and complete.
 *
 * Like broker-outage.test.ts, the test runs its own single-node broker, on RESTART_FAULT_KAFKA:
 * on 4.4.0 it failed 3 runs in 39 with hanging changelog transactions, and the one whose broker
 * log was read showed the markers it skipped right after fencing itself (KAFKA-20734;
 * CHANGELOG.md, sixth stop of 12-05). TEST_KEEP_BROKER=1 leaves the broker running after the
 * test, to inspect with Kafka's kafka-transactions.sh; TEST_WORKER_LOGS=<dir> keeps every worker
 * line.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { eventually, jobTopics, produce } from '../helpers/kafka.js';
import { allReady, ownBroker, ownBrokerPort, RESTART_FAULT_KAFKA } from '../helpers/own-broker.js';
import { assertExactOutput, RunningSumInput } from '../helpers/running-sum.js';
import { metricSum, spawnWorker } from '../helpers/workers.js';

const PORT = await ownBrokerPort(process.env.TEST_FREEZE_KAFKA_PORT);
const SLICE = Number(process.env.TEST_FREEZE_SLICE ?? 6000);
/** Past kafkajs's 30 s request timeout (client.ts), so requests in flight time out on the client. */
const FROZEN_MS = Number(process.env.TEST_FREEZE_MS ?? 35_000);
// Not the suite's Kafka: a thawed single node is fenced by its own controller for a moment, and
// 4.3/4.4 then drop the markers they send meanwhile (KAFKA-20734, see own-broker.ts).
const broker = ownBroker(PORT, 'sluice-freeze-kafka', { version: RESTART_FAULT_KAFKA });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

before(() => broker.start());

after(async () => {
  await broker.remove();
});

test('exactly-once should survive a broker frozen (SIGSTOP) past the request timeout, then thawed', {
  timeout: 300_000,
}, async (t) => {
  const { input, output, env } = await jobTopics('t-freeze', 4);
  const data = new RunningSumInput({ seed: 11, keys: 200 });
  const args = ['--processing.guarantee', 'exactly_once', '--log-level', 'info'];
  const slots = [0, 1].map((i) => ({
    name: `w${i}`,
    stateDir: mkdtempSync(join(tmpdir(), `sluice-freeze-${i}-`)),
  }));
  const workers = slots.map((s) => spawnWorker('running-sum', { ...s, env, args }));
  t.after(async () => {
    await Promise.all(workers.map((w) => w.kill('SIGKILL')));
    for (const s of slots) rmSync(s.stateDir, { recursive: true, force: true });
  });
  await eventually(() => allReady(workers), { timeoutMs: 90_000, what: 'both workers ready' });
  await produce(input, data.next(SLICE));
  const { pid, outputs: before } = await broker.signalMidStream('SIGSTOP', workers, output);
  t.diagnostic(`broker frozen with ${before}/${SLICE} outputs committed, for ${FROZEN_MS} ms`);
  await sleep(FROZEN_MS);
  process.kill(-pid, 'SIGCONT');
  await produce(input, data.next(SLICE));
  await assertExactOutput(t, {
    output,
    input: data,
    workers,
    inputTopic: input,
    group: output.replace(/-out$/, ''),
    timeoutMs: 150_000,
  });
  for (const w of workers) assert.equal(w.child.exitCode, null, `${w.name} still running`);
  // What the freeze did to the workers (diagnostics: exactness is the assertion).
  for (const w of workers) {
    const m = await w.metrics();
    t.diagnostic(
      `${w.name}: ${metricSum(m, 'sluice_checkpoint_failures_total')} failed checkpoints, ` +
        `${metricSum(m, 'sluice_rebalances_total')} rebalances`,
    );
  }
});
