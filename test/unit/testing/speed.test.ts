import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, json, string } from '../../../src/index.js';
import { TestDriver } from '../../../src/testing/index.js';

/**
 * "Hundreds of tests a second": 200 small tests in a loop, each a new driver (a keyed count and
 * a stateless filter, 2 partitions), three records, its assertions, close. The rate is printed
 * as a diagnostic. About 380/s on the idle 2-core dev machine, 20-60/s while other suites loaded
 * it (load average 12-14); the floor asserted (10/s) only catches a driver gone pathologically slow
 * (opening RocksDB for each stateful task costs 50-70 ms).
 */
function job(): App {
  const app = new App({ id: 'drv-speed' });
  const clicks = app.stream('clicks', { key: string(), value: json<{ user: string; bot: boolean }>() });
  clicks
    .filter((c) => !c.bot)
    .keyBy((c) => c.user, { name: 'by-user' })
    .count({ name: 'clicks' })
    .to('counts', { value: json<number>() });
  return app;
}

test('200 small driver tests should run at more than 10 a second', async (t) => {
  const n = 200;
  const started = performance.now();
  for (let i = 0; i < n; i++) {
    const driver = new TestDriver(job(), { partitions: 2 });
    try {
      const clicks = driver.input('clicks');
      await clicks.pipe('c1', { user: `u${i}`, bot: false });
      await clicks.pipe('c2', { user: 'bot', bot: true });
      await clicks.pipe('c3', { user: `u${i}`, bot: false });
      assert.deepEqual(driver.output('counts').readValues(), [1, 2]);
      assert.equal(driver.state('clicks').get(`u${i}`), 2);
    } finally {
      await driver.close();
    }
  }
  const seconds = (performance.now() - started) / 1000;
  const rate = n / seconds;
  t.diagnostic(`${n} driver tests in ${seconds.toFixed(2)} s: ${rate.toFixed(0)} tests/s`);
  assert.ok(rate > 10, `${rate.toFixed(0)} tests/s`);
});
