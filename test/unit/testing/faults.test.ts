import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, json, string } from '../../../src/index.js';
import { TestDriver } from '../../../src/testing/index.js';

/**
 * Deterministic faults with the test driver: a crash drops what was not checkpointed, a restart
 * restores from the simulated changelog and the committed offsets, a rebalance moves tasks.
 * State and outputs stay exactly-once; a side effect outside Sluice does not, and the test sees it.
 */

/**
 * A running sum per key (input keyed by account: one sub-topology, the sum in the task that reads
 * the input), and a counter outside Sluice bumped for every record the operator sees.
 */
function runningSum(id: string, external: { calls: number }): App {
  const app = new App({ id });
  app
    .keyedStream('amounts', { key: string(), value: json<number>() })
    .peek(() => {
      external.calls++;
    })
    // Every update (no record cache): the test counts each one.
    .reduce((a, b) => a + b, { name: 'sum', cache: false })
    .to('sums', { value: json<number>() });
  return app;
}

for (const [state, wipeState] of [
  ['memory', false],
  ['memory', true],
  ['rocksdb', false],
  ['rocksdb', true],
] as const) {
  test(`a crash and restart should keep a running sum exact (${state}, ${wipeState ? 'state wiped: full restore' : 'folder kept'}), and show the re-processed records to a side effect`, async () => {
    const external = { calls: 0 };
    const driver = new TestDriver(runningSum(`drv-crash-${wipeState}`, external), {
      partitions: 3,
      commit: 'manual',
      state,
    });
    try {
      const amounts = driver.input('amounts');
      for (let i = 1; i <= 5; i++) await amounts.pipe(`acct-${i % 2}`, i);
      await driver.commit();
      const sums = driver.output<string, number>('sums');
      /** The outputs not read yet, as sorted [key, sum] pairs (partitions are read one by one). */
      const unread = () =>
        sums
          .readAll()
          .map((r) => [r.key, r.value])
          .sort();
      assert.deepEqual(unread(), [
        ['acct-0', 2],
        ['acct-0', 6],
        ['acct-1', 1],
        ['acct-1', 4],
        ['acct-1', 9],
      ]);
      // Three more, not committed: then the worker dies.
      for (let i = 6; i <= 8; i++) await amounts.pipe(`acct-${i % 2}`, i);
      assert.equal(driver.state('sum').get('acct-0'), 2 + 4 + 6 + 8, 'uncommitted state is readable');
      assert.ok(sums.isEmpty, 'uncommitted outputs are not visible (read_committed)');
      await driver.crash({ wipeState });
      assert.throws(() => driver.state('sum').get('acct-0'), /no task of it is running/);
      assert.equal(external.calls, 8);
      // The restart restores the checkpoint (sums 6 and 9) and processes 6, 7 and 8 again.
      await driver.restart();
      await driver.commit();
      assert.equal(driver.state('sum').get('acct-0'), 20, 'acct-0: 2+4+6+8, each once');
      assert.equal(driver.state('sum').get('acct-1'), 1 + 3 + 5 + 7);
      assert.deepEqual(
        unread(),
        [
          ['acct-0', 12],
          ['acct-0', 20],
          ['acct-1', 16],
        ],
        'each output once: the crashed attempt committed nothing',
      );
      // The non-idempotent side effect: the 3 uncommitted records were processed twice.
      assert.equal(external.calls, 11);
    } finally {
      await driver.close();
    }
  });
}

/**
 * At-least-once sends a batch's outputs as soon as the batch is processed (issue 19: they no
 * longer wait for the checkpoint), so a crash before the checkpoint repeats the outputs sent
 * since the last one; the state stays exact (restored from the checkpoint).
 */
test('at-least-once: a crash between checkpoints repeats the outputs sent since the last one, and the state stays exact', async () => {
  const external = { calls: 0 };
  const driver = new TestDriver(runningSum('drv-alo', external), {
    commit: 'manual',
    config: { processing: { guarantee: 'at_least_once' } },
  });
  try {
    await driver.input('amounts').pipe('a', 1);
    await driver.commit();
    await driver.input('amounts').pipe('a', 2);
    await driver.crash();
    await driver.restart();
    await driver.commit();
    assert.deepEqual(
      driver.output('sums').readValues(),
      [1, 3, 3],
      'the sum 3 went out before the crash, and again',
    );
    assert.equal(driver.state('sum').get('a'), 3);
  } finally {
    await driver.close();
  }
});

test('a failed commit should reset the task to its last checkpoint and process again, exactly once in state and output', async () => {
  const external = { calls: 0 };
  const driver = new TestDriver(runningSum('drv-failcommit', external));
  try {
    await driver.input('amounts').pipe('a', 1);
    driver.failNextCommit();
    await driver.input('amounts').pipe('a', 2);
    await driver.input('amounts').pipe('a', 3);
    assert.deepEqual(driver.output('sums').readValues(), [1, 3, 6]);
    assert.equal(driver.state('sum').get('a'), 6);
    assert.ok(
      external.calls > 3,
      `the failed checkpoint's records were processed again (${external.calls} calls)`,
    );
  } finally {
    await driver.close();
  }
});

test('a rebalance should move tasks between workers and the moved state go on exactly', async () => {
  const external = { calls: 0 };
  const driver = new TestDriver(runningSum('drv-rebalance', external), { partitions: 4 });
  try {
    const amounts = driver.input('amounts');
    const keys = ['k1', 'k2', 'k3', 'k4', 'k5', 'k6'];
    for (const k of keys) await amounts.pipe(k, 1);
    assert.deepEqual(new Set(Object.values(driver.assignment)), new Set([0]));
    await driver.rebalance({ workers: 2 });
    const owners = Object.values(driver.assignment);
    assert.equal(owners.filter((w) => w === 1).length, 2, 'the sticky assigner gives the new worker half');
    for (const k of keys) await amounts.pipe(k, 10);
    for (const k of keys) assert.equal(driver.state('sum').get(k), 11, `${k} restored where it moved`);
    // Back again: the first worker's folder is behind by what the second committed (a tail replay).
    await driver.rebalance({ workers: 1 });
    for (const k of keys) await amounts.pipe(k, 100);
    for (const k of keys) assert.equal(driver.state('sum').get(k), 111);
    const out = driver.output<string, number>('sums').readAll();
    assert.equal(out.length, 18, 'one output per input');
  } finally {
    await driver.close();
  }
});

test('a zombie (the old owner that missed the rebalance) should be fenced: its uncommitted work is redone once by the new owner', async () => {
  const app = new App({ id: 'drv-zombie' });
  app
    .keyedStream('amounts', { key: string(), value: json<number>() })
    // Every update (no record cache): the test counts each one.
    .reduce((a, b) => a + b, { name: 'sum', cache: false })
    .to('sums', { value: json<number>() });
  const driver = new TestDriver(app, { commit: 'manual', workers: 2 });
  try {
    await driver.input('amounts').pipe('a', 1);
    await driver.commit();
    await driver.input('amounts').pipe('a', 2);
    const owner = driver.assignment['0_0']!;
    await driver.rebalance({ move: { '0_0': 1 - owner }, revoke: 'zombie' });
    assert.deepEqual(driver.fenced, ['0_0'], 'the zombie commit was refused');
    await driver.commit();
    assert.deepEqual(driver.output('sums').readValues(), [1, 3]);
    assert.equal(driver.state('sum').get('a'), 3);
  } finally {
    await driver.close();
  }
});
