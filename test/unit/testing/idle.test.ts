import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SluiceConfigInput } from '../../../src/config/schema.js';
import { App, json, string, tumbling } from '../../../src/index.js';
import { TestDriver } from '../../../src/testing/index.js';

/**
 * Idle inputs (issue 13, item 9): `processing.idleTimeoutMs` takes a silent input out of the
 * watermark, `processing.idleAdvanceMs` moves the watermark with the wall clock once the whole
 * input is quiet. With the test driver: its wall clock is the tasks' clock, and advanceWallClock
 * ticks them as a worker's timer does.
 */

const W0 = 1_000_000;

/** Two stream inputs merged into one task (one partition each): a per-second count. */
function twoInputs(id: string): App {
  const app = new App({ id });
  const a = app.stream('a', { key: string(), value: json<number>() });
  const b = app.stream('b', { key: string(), value: json<number>() });
  a.merge(b).byKey().window(tumbling(1_000), { name: 'per-second' }).count().to('counts', { value: json() });
  return app;
}

function oneInput(id: string): App {
  const app = new App({ id });
  app
    .stream('a', { key: string(), value: json<number>() })
    .byKey()
    .window(tumbling(1_000), { name: 'per-second' })
    .count()
    .to('counts', { value: json() });
  return app;
}

const windows = (d: TestDriver) =>
  d
    .output('counts')
    .readValues()
    .map((v) => v as { start: number; end: number; value: number });

async function lateCount(d: TestDriver): Promise<number> {
  const m = await d.registry.getSingleMetric('sluice_late_records_total')?.get();
  return (m?.values ?? []).reduce((s, v) => s + v.value, 0);
}

/** b speaks once, then a goes on alone: b's time (0) is the minimum. */
async function silentB(config: SluiceConfigInput, app: App): Promise<TestDriver> {
  const d = new TestDriver(app, { wallClock: W0, config });
  await d.input('b').pipe('k', 1, { timestamp: 0 });
  await d.advanceWallClock(3_000);
  const a = d.input('a');
  await a.pipe('k', 1, { timestamp: 100 });
  await a.pipe('k', 1, { timestamp: 900 });
  await a.pipe('k', 1, { timestamp: 1_500 });
  return d;
}

test('a silent input should hold the last window open forever without processing.idleTimeoutMs', async () => {
  const d = await silentB({}, twoInputs('idle-off'));
  try {
    await d.advanceWallClock(3_600_000);
    await d.input('a').pipe('k', 1, { timestamp: 2_500 });
    await d.advanceWallClock(3_600_000);
    assert.deepEqual(windows(d), [], 'b at 0 holds the watermark at 0');
    assert.equal(d.tasks.get('0_0')!.watermark, 0);
    assert.deepEqual(d.tasks.get('0_0')!.idleInputs, []);
  } finally {
    await d.close();
  }
});

test('a silent input should stop holding the watermark after processing.idleTimeoutMs, on the tick', async () => {
  const d = await silentB({ processing: { idleTimeoutMs: 5_000 } }, twoInputs('idle-on'));
  try {
    const task = d.tasks.get('0_0')!;
    await d.advanceWallClock(1_999); // b quiet 4 999 ms
    assert.deepEqual(windows(d), []);
    assert.equal(task.watermark, 0);
    await d.advanceWallClock(1); // b quiet 5 000 ms: idle; a (quiet 2 000 ms) alone makes it
    assert.deepEqual(task.idleInputs, ['b']);
    assert.equal(task.watermark, 1_500);
    // Closed on the tick and committed by the checkpoint after it (the driver reads committed output).
    assert.deepEqual(windows(d), [{ start: 0, end: 1_000, value: 3 }]);
    // a goes on: its records move the watermark at once, as if b were not there.
    await d.input('a').pipe('k', 1, { timestamp: 2_100 });
    assert.deepEqual(windows(d), [{ start: 1_000, end: 2_000, value: 1 }]);
  } finally {
    await d.close();
  }
});

test('an idle input that speaks again should not move the watermark back, and its old records should be late', async () => {
  const d = await silentB({ processing: { idleTimeoutMs: 5_000 } }, twoInputs('idle-back'));
  try {
    const task = d.tasks.get('0_0')!;
    await d.advanceWallClock(2_000);
    assert.equal(task.watermark, 1_500);
    windows(d);
    const b = d.input('b');
    await b.pipe('k', 1, { timestamp: 200 }); // its window closed: late
    assert.equal(await lateCount(d), 1);
    assert.equal(task.watermark, 1_500, 'the watermark never goes back');
    assert.deepEqual(task.idleInputs, [], 'b is active again');
    await b.pipe('k', 1, { timestamp: 1_800 });
    assert.equal(task.watermark, 1_500, 'min(a 1500, b 1800)');
    await d.input('a').pipe('k', 1, { timestamp: 2_100 });
    assert.equal(task.watermark, 1_800, 'b holds the watermark again');
    assert.deepEqual(windows(d), []);
    await b.pipe('k', 1, { timestamp: 2_200 });
    assert.equal(task.watermark, 2_100);
    // a's 1 500 and b's 1 800; b's 200 was late, not counted.
    assert.deepEqual(windows(d), [{ start: 1_000, end: 2_000, value: 2 }]);
    assert.equal(await lateCount(d), 1);
    // Both go idle: the watermark moves to the larger time (b's 2 200), not the minimum.
    await d.advanceWallClock(5_000);
    assert.deepEqual(task.idleInputs, ['a', 'b']);
    assert.equal(task.watermark, 2_200);
  } finally {
    await d.close();
  }
});

test('after a restart an idle input should hold the watermark again for the timeout, but not below the committed one', async () => {
  const d = await silentB({ processing: { idleTimeoutMs: 5_000 } }, twoInputs('idle-restart'));
  try {
    await d.advanceWallClock(2_000);
    assert.deepEqual(windows(d), [{ start: 0, end: 1_000, value: 3 }]);
    await d.crash();
    await d.restart();
    const task = d.tasks.get('0_0')!;
    // Recomputed from the committed times it would be min(a 1500, b 0) = 0; the committed "w" is 1 500.
    assert.equal(task.watermark, 1_500);
    assert.deepEqual(task.idleInputs, [], 'the idle clocks start again with the task');
    await d.input('a').pipe('k', 1, { timestamp: 2_100 });
    assert.equal(task.watermark, 1_500, 'b holds it again');
    await d.input('b').pipe('k', 1, { timestamp: 900 });
    assert.equal(await lateCount(d), 1, 'a record of the window closed before the crash stays late');
    await d.advanceWallClock(5_000);
    assert.equal(task.watermark, 2_100);
    assert.deepEqual(windows(d), [{ start: 1_000, end: 2_000, value: 1 }]);
  } finally {
    await d.close();
  }
});

test('the last window should never close on a quiet input without processing.idleAdvanceMs', async () => {
  const d = new TestDriver(oneInput('advance-off'), { wallClock: W0 });
  try {
    await d.input('a').pipe('k', 1, { timestamp: 100 });
    await d.input('a').pipe('k', 1, { timestamp: 900 });
    await d.advanceWallClock(3_600_000);
    assert.deepEqual(windows(d), []);
  } finally {
    await d.close();
  }
});

test('a quiet input should close its last window on processing time after processing.idleAdvanceMs, and keep that watermark over a crash', async () => {
  const d = new TestDriver(oneInput('advance-on'), {
    wallClock: W0,
    config: { processing: { idleAdvanceMs: 10_000, maxOutOfOrdernessMs: 50 } },
  });
  try {
    const a = d.input('a');
    await a.pipe('k', 1, { timestamp: 100 });
    await a.pipe('k', 1, { timestamp: 900 });
    await d.advanceWallClock(9_999);
    assert.deepEqual(windows(d), [], 'not quiet long enough');
    assert.equal(d.tasks.get('0_0')!.watermark, 850);
    await d.advanceWallClock(1);
    // 900 (max seen) + 10 000 (quiet) − 50 (disorder)
    assert.equal(d.tasks.get('0_0')!.watermark, 10_850);
    assert.deepEqual(windows(d), [{ start: 0, end: 1_000, value: 2 }]);
    await d.advanceWallClock(5_000);
    assert.equal(d.tasks.get('0_0')!.watermark, 15_850, 'event time flows with the wall clock');
    // A restart recomputes the watermark from the committed times (900 − 50) but not below the
    // watermark committed with the last checkpoint (the one that closed the window; the tick at
    // 15 850 fired nothing, so nothing was committed): a record of a window it passed stays late.
    await d.crash();
    await d.restart();
    assert.equal(d.tasks.get('0_0')!.watermark, 10_850);
    await a.pipe('k', 1, { timestamp: 5_000 });
    assert.equal(await lateCount(d), 1);
    // The input speaks again: the watermark waits for its event time to pass 10 850.
    await a.pipe('k', 1, { timestamp: 17_000 });
    assert.equal(d.tasks.get('0_0')!.watermark, 16_950);
    assert.deepEqual(windows(d), []);
  } finally {
    await d.close();
  }
});
