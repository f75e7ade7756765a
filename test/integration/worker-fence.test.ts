import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { eventually, jobTopics, produce, testKafka } from '../helpers/kafka.js';
import { assertExactOutput, RunningSumInput } from '../helpers/running-sum.js';
import {
  addsTasks,
  allTasksRunning,
  exactlyOnceArgs,
  metricSum,
  spawnWorker,
  type WorkerProcess,
  workerGroup,
} from '../helpers/workers.js';

/**
 * Exactly-once v2: a worker's transactional producer fenced under it. The epoch of the worker's
 * transactional id (`<appId>-<group.instance.id>`) is bumped by another InitProducerId, as the
 * transaction coordinator does when the worker's transaction outlives its timeout, at once and
 * without freezing anything (freeze-in-session.test.ts waits for the coordinator's sweep).
 *
 * - On a live member, twice (each worker once): its next transaction meets the fence, the tasks
 *   in it go back to their last checkpoint, the producer is made again (its InitProducerId fences
 *   the intruder in turn), and no task moves: the worker is still in the group's generation,
 *   which every later TxnOffsetCommit is checked against.
 * - On a worker frozen (SIGSTOP) past its session and fenced meanwhile, then thawed: it is out
 *   of the group; whatever it meets first (the fence, the group's refusal, its heartbeat), its
 *   tasks must not commit again before a new assignment, and it gets tasks back.
 *
 * The output, read by Kafka's own Java console consumer (read_committed), must hold every running
 * sum exactly once, in order.
 */
const SESSION_MS = 6000;
const SLICE = 500;
const SLICE_EVERY_MS = 500;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a worker producer fenced under a live member resets its tasks, under a frozen one loses them; the output stays exact', {
  timeout: 300_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-wfence', 4);
  const group = workerGroup(t, id);
  const args = exactlyOnceArgs(SESSION_MS);
  const slots = [0, 1].map((i) => ({
    name: `w${i}`,
    stateDir: mkdtempSync(join(tmpdir(), `sluice-wfence-${i}-`)),
  }));
  const workers: WorkerProcess[] = slots.map((s) =>
    group.add(spawnWorker('running-sum', { ...s, env, args })),
  );
  const inputGen = new RunningSumInput({ seed: 4711, keys: 500 });
  let producing = false;
  let producer: Promise<void> = Promise.resolve();
  /** Input flows in small slices until the last round is over, so that every fence meets a transaction. */
  const feed = () => {
    producing = true;
    producer = (async () => {
      while (producing) {
        await produce(input, inputGen.next(SLICE));
        await sleep(SLICE_EVERY_MS);
      }
    })();
  };

  /** InitProducerId with the worker's transactional id: its open transaction is aborted, its epoch fenced. */
  const fence = async (i: number) => {
    const instance = readFileSync(join(slots[i]!.stateDir, id, 'instance-id'), 'utf8').trim();
    const intruder = testKafka().producer({
      transactionalId: `${id}-${instance}`,
      idempotent: true,
      maxInFlightRequests: 1,
    });
    await intruder.connect();
    try {
      const tx = await intruder.transaction();
      await tx.abort().catch(() => undefined);
    } finally {
      await intruder.disconnect();
    }
  };
  const logged = (w: WorkerProcess, mark: number, what: string) =>
    w.logsSince(mark).filter((l) => l.includes(what)).length;
  const running = () =>
    eventually(async () => (await Promise.all(workers.map((w) => allTasksRunning(w)))).every(Boolean), {
      timeoutMs: 90_000,
      what: 'every worker runs tasks',
    });

  /** An assignment since `mark` gave `w` tasks back, and every worker runs all of its tasks. */
  const rejoined = async (w: WorkerProcess, mark: number) => {
    await eventually(() => w.logsSince(mark).some(addsTasks), { timeoutMs: 90_000, what: 'tasks added' });
    await running();
  };

  try {
    await group.step('both workers run tasks', running);
    feed();
    await sleep(2000);
    for (const i of [0, 1]) {
      const w = workers[i]!;
      const mark = w.logMark();
      await fence(i);
      await group.step(`w${i}'s next transaction meets the fence: its tasks reset`, () =>
        eventually(() => logged(w, mark, 'task resets to its last checkpoint') > 0, {
          timeoutMs: 30_000,
          what: 'task reset',
        }),
      );
      assert.ok(
        logged(w, mark, 'worker transaction failed') > 0,
        'the reset came from the failed transaction',
      );
      await group.step(`w${i} runs its tasks again`, running);
      await group.step(`w${i} commits again`, async () => {
        const committed = () => w.metrics().then((m) => metricSum(m, 'sluice_transaction_commits_total'));
        const before = await committed();
        await eventually(async () => (await committed()) > before, { timeoutMs: 30_000, what: 'a commit' });
      });
      assert.equal(
        logged(w, mark, 'task migrated') + logged(w, mark, '"lost":true'),
        0,
        'a fence of a live member moves no task',
      );
      await sleep(1500);
    }

    // Frozen past its session, fenced meanwhile (its transaction's timeout would do the same), thawed.
    const w = workers[0]!;
    const other = workers[1]!;
    const frozenAt = other.logMark();
    w.child.kill('SIGSTOP');
    await sleep(SESSION_MS);
    // Thawed only once the other took its tasks: thawed earlier, it would join that same
    // rebalance and lose nothing (no generation missed).
    await group.step("the other worker took the frozen one's tasks", () =>
      eventually(() => other.logsSince(frozenAt).some(addsTasks), { timeoutMs: 60_000, what: 'a takeover' }),
    );
    await fence(0);
    const thawed = w.logMark();
    w.child.kill('SIGCONT');
    await group.step('the thawed worker lost its tasks, rejoined and got tasks back', () =>
      rejoined(w, thawed),
    );
    t.diagnostic(
      `after the thaw: tasks migrated ${logged(w, thawed, 'task migrated')}, rejoins after a missed generation ${logged(w, thawed, '"lost":true')}`,
    );
    assert.ok(
      logged(w, thawed, 'task migrated') + logged(w, thawed, '"lost":true') > 0,
      'the thawed worker closed the tasks it held without committing',
    );

    await sleep(2000);
    producing = false;
    await producer;
    t.diagnostic(`${inputGen.count} input records`);
    await assertExactOutput(t, {
      output,
      input: inputGen,
      workers,
      group: id,
      inputTopic: input,
      timeoutMs: 120_000,
    });
  } finally {
    producing = false;
    for (const w of workers) w.child.kill('SIGCONT');
    await producer.catch(() => undefined);
  }
});
