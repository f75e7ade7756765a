import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { jobTopics, produce } from '../helpers/kafka.js';
import { assertExactOutput, RunningSumInput } from '../helpers/running-sum.js';
import { exactlyOnceArgs, spawnWorker, type WorkerProcess, workerGroup } from '../helpers/workers.js';

/**
 * A worker frozen (SIGSTOP) past its transaction's timeout but within its session: a GC pause or
 * a stalled VM shorter than the group's patience. The group keeps its tasks (no rebalance), but
 * the transaction coordinator aborts the transaction it had open and bumps its producer's epoch.
 * Thawed (SIGCONT), the worker holds outputs and state of records whose transaction is gone: its
 * next commit is refused, its tasks must go back to their last checkpoint, and the producer be
 * made again. The zombie test's freezes (6 s sessions) are shorter than the 10 s transaction
 * timeout, so they never meet this. Counted by Kafka's own console consumer, read_committed.
 */
const KEYS = 1000;
const SESSION_MS = 30_000;
/**
 * Past the worker's transaction timeout (WORKER_TRANSACTION_TIMEOUT_MS, 10 s) by more than the
 * coordinator's sweep for timed-out transactions (every 10 s, Kafka's
 * transaction.abort.timed.out.transaction.cleanup.interval.ms), within the 30 s session: the
 * open transaction is aborted during every freeze, not only when a sweep happens to fall in it.
 */
const FREEZE_MS = 21_000;
/** Freezes tried until one lands on an open transaction. */
const MAX_FREEZES = 8;
/** Input flows in small slices all the time: the worker always has records processed and so a
 *  transaction begun ahead of its next checkpoint (open on the coordinator), when it stops. */
const SLICE = 20;
const SLICE_EVERY_MS = 20;
const PARTITIONS = 4;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('exactly-once should hold through a freeze past the transaction timeout, within the session', {
  timeout: 420_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-freeze-in-session', PARTITIONS);
  const group = workerGroup(t, id);
  const args = exactlyOnceArgs(SESSION_MS);
  const workers: WorkerProcess[] = [0, 1].map((i) =>
    group.add(
      spawnWorker('running-sum', {
        name: `w${i}`,
        stateDir: mkdtempSync(join(tmpdir(), `sluice-freeze-${i}-`)),
        env,
        args,
      }),
    ),
  );
  const inputGen = new RunningSumInput({ seed: 77, keys: KEYS });
  await group.step('both workers serve HTTP', () => Promise.all(workers.map((w) => w.url())));
  let producing = true;
  const feeding = (async () => {
    while (producing) {
      await produce(input, inputGen.next(SLICE));
      await sleep(SLICE_EVERY_MS);
    }
  })();
  await sleep(3000);
  const marks = workers.map((w) => w.logMark());
  const failedSince = () =>
    workers.flatMap((w, i) => w.logsSince(marks[i]!)).filter((l) => l.includes('worker transaction failed'))
      .length;
  let freezes = 0;
  try {
    // A freeze meets the fence only if the worker had a transaction open when it stopped.
    while (freezes < MAX_FREEZES && failedSince() === 0) {
      const w = workers[freezes % workers.length]!;
      w.child.kill('SIGSTOP');
      await sleep(FREEZE_MS);
      w.child.kill('SIGCONT');
      freezes++;
      await sleep(4000);
    }
  } finally {
    for (const w of workers) w.child.kill('SIGCONT');
    producing = false;
    await feeding;
  }
  // No rebalance: the freezes were within the session, so neither worker gave tasks away.
  const since = workers.flatMap((w, i) => w.logsSince(marks[i]!));
  const moved = since.filter((l) => l.includes('"lost":true') || l.includes('task migrated')).length;
  // The frozen worker's open transaction was aborted by its coordinator: the thawed worker met
  // the fence and sent its tasks back to their last checkpoint (else this run proved nothing).
  t.diagnostic(
    `${freezes} freezes of ${FREEZE_MS} ms; worker transactions failed after a thaw: ${failedSince()}; tasks lost or migrated: ${moved}`,
  );
  assert.ok(failedSince() >= 1, 'a thawed worker found its transaction aborted by the timeout');
  assert.equal(moved, 0, 'a freeze within the session moves no task');
  await assertExactOutput(t, {
    output,
    input: inputGen,
    workers,
    group: id,
    inputTopic: input,
    timeoutMs: 180_000,
  });
});
