import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SluiceConfigInput } from '../../../src/config/schema.js';
import { App, json, string, tumbling } from '../../../src/index.js';
import { TestDriver } from '../../../src/testing/index.js';

/**
 * Watermarks through repartition topics (issue 13, item 10), with the test driver: the task after
 * a keyBy takes the minimum of its upstream tasks' announced watermarks.
 */
function keyedWindows(id: string): App {
  const app = new App({ id });
  app
    .stream('orders', { key: string(), value: json<{ k: string }>() })
    .keyBy((o) => o.k, { name: 'by-k' })
    .window(tumbling(1_000), { grace: 0, name: 'per-second' })
    .late('late')
    .count()
    .to('counts', { value: json() });
  return app;
}

async function drive(config: SluiceConfigInput) {
  const d = new TestDriver(keyedWindows('rwm-drv'), { partitions: 2, wallClock: 1_000_000, config });
  const orders = d.input('orders');
  // Source partition 0 runs far ahead in event time; partition 1 then comes with older times.
  for (let t = 0; t < 5_000; t += 100)
    await orders.pipe('a', { k: `k${t % 3}` }, { timestamp: t, partition: 0 });
  return { d, orders };
}

test('after a keyBy, an upstream partition far ahead should not make another one’s on-time records late', async () => {
  const { d, orders } = await drive({});
  try {
    assert.deepEqual(
      d.output('counts').readAll(),
      [],
      'upstream task 1 has no watermark yet: nothing closes',
    );
    for (let t = 0; t < 5_000; t += 100)
      await orders.pipe('b', { k: `k${t % 3}` }, { timestamp: t, partition: 1 });
    assert.deepEqual(d.output('late').readAll(), [], 'no record late');
    const closed = d.output<string, { start: number; value: number }>('counts').readAll();
    assert.ok(closed.length > 0, 'windows closed');
    // Every window below partition 1's time closed with both partitions' records in it.
    for (const r of closed)
      assert.ok(r.value.value >= 6, `window ${r.key}@${r.value.start}: ${r.value.value}`);
  } finally {
    await d.close();
  }
});

test('an upstream partition without records should hold the windows after a keyBy, until processing.idleTimeoutMs', async () => {
  const off = await drive({});
  try {
    await off.d.advanceWallClock(60_000);
    assert.deepEqual(off.d.output('counts').readAll(), [], 'held without the idle timeout');
  } finally {
    await off.d.close();
  }
  const on = await drive({ processing: { idleTimeoutMs: 5_000 } });
  try {
    await on.d.advanceWallClock(6_000);
    await on.d.input('orders').pipe('c', { k: 'k0' }, { timestamp: 5_000, partition: 0 });
    assert.ok(on.d.output('counts').readAll().length > 0, 'upstream task 1, silent, is left out');
  } finally {
    await on.d.close();
  }
});
