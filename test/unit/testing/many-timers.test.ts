import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, json, string } from '../../../src/index.js';
import { TestDriver } from '../../../src/testing/index.js';

/**
 * Issue 13.6 through a real task (test driver, real RocksDB): 200k registered timers; the task's
 * restart must not block the event loop with a scan of all of them (the earlier service read every
 * timer into a heap synchronously at start), and the timers fire in order, exactly once, across a
 * crash and a restore from the changelog alone.
 */
const N = 200_000;
const BASE = 1_000_000;

function app() {
  const a = new App({ id: 'unit-many-timers' });
  a.stream('in', { key: string(), value: json<{ arm?: number }>() })
    .byKey()
    .process<{ ts: number }, any>(
      {
        state: {},
        onRecord(r, ctx) {
          if (r.arm) for (let i = 0; i < r.arm; i++) ctx.timers.atEventTime(BASE + i);
        },
        onTimer(ts, ctx) {
          ctx.emit({ ts });
        },
      },
      { name: 'p' },
    )
    .to('fired', { value: json<{ ts: number }>() });
  return a;
}

test('a task with 200k timers should restart without a long event-loop block, and fire them in order exactly once across a crash', async () => {
  const driver = new TestDriver(app(), { state: 'rocksdb', commit: 'manual' });
  try {
    const input = driver.input('in');
    await input.pipe('a', { arm: N }, { timestamp: 0 });
    await driver.commit();

    await driver.crash();
    // The longest gap between ticks of a 5 ms interval: how long the event loop was blocked.
    // (perf_hooks' monitorEventLoopDelay missed a 4.6 s block here.)
    let last = performance.now();
    let maxBlockMs = 0;
    const tick = setInterval(() => {
      const now = performance.now();
      maxBlockMs = Math.max(maxBlockMs, now - last);
      last = now;
    }, 5);
    await new Promise((r) => setTimeout(r, 20));
    const began = performance.now();
    await driver.restart();
    const restartMs = performance.now() - began;
    await new Promise((r) => setTimeout(r, 20));
    clearInterval(tick);
    process.stderr.write(
      `# restart with ${N} timers: ${restartMs.toFixed(0)} ms, longest event-loop block ${maxBlockMs.toFixed(1)} ms\n`,
    );
    // The old full scan blocked for the whole load (a scan of 200k keys alone takes ~0.8 s on the
    // 2-core dev machine; the old service blocked 4.6-5.6 s in this test); the bounded window
    // takes milliseconds (the longest block measured 29-72 ms). Generous for a loaded machine.
    // 30–70 ms here when quiet, 230 ms seen with a load average of 18 on 2 cores; the full scan
    // this replaced blocked 4.6–5.6 s. What is read is counted exactly in timers-window.test.ts.
    assert.ok(maxBlockMs < 1500, `the restart blocked the event loop for ${maxBlockMs.toFixed(1)} ms`);

    // Half fire and commit; a quarter more fire uncommitted and are lost with a crash.
    await input.pipe('x', {}, { timestamp: BASE + N / 2 - 1 });
    await driver.commit();
    await input.pipe('x', {}, { timestamp: BASE + (3 * N) / 4 });
    await driver.crash({ wipeState: true });
    await driver.restart(); // restores the timer store from its changelog alone
    await input.pipe('x', {}, { timestamp: BASE + N });
    await driver.commit();

    const fired = driver
      .output('fired')
      .readValues()
      .map((v: { ts: number }) => v.ts);
    assert.equal(
      fired.length,
      N,
      'every timer fired once (the uncommitted ones again after the crash, not twice)',
    );
    for (let i = 0; i < N; i++)
      if (fired[i] !== BASE + i) assert.fail(`fired[${i}] = ${fired[i]}, want ${BASE + i}`);
  } finally {
    await driver.close();
  }
});
