import assert from 'node:assert/strict';
import { test } from 'node:test';
import { json, string, tumbling } from 'sluice';
import { createTopics, produce, readAll } from '../helpers/kafka.js';
import { inProcessApp } from '../helpers/workers.js';

/**
 * `processing.idleTimeoutMs` with a real worker and broker: two stream inputs merged into one
 * task, one silent after its first record. The silent one holds the watermark at its time until
 * the idle timeout passes; then the worker's periodic tick moves the watermark, closes the window
 * and the next checkpoint commits its result (read here read_committed).
 */
test('a tumbling window should close after processing.idleTimeoutMs although one input stays silent', {
  timeout: 120_000,
}, async (t) => {
  const { id, input, output, app, start } = await inProcessApp(t, 't-idle', 1);
  const quiet = `${id}-quiet`;
  await createTopics([{ topic: quiet, partitions: 1 }]);
  const a = app.stream(input, { key: string(), value: json<number>() });
  const b = app.stream(quiet, { key: string(), value: json<number>() });
  a.merge(b).byKey().window(tumbling(1_000), { name: 'per-second' }).count().to(output, { value: json() });
  await start('warn', { idleTimeoutMs: 2_000 });
  const rec = (ts: number) => ({ key: 'k', value: '1', timestamp: String(ts) });
  await produce(quiet, [rec(0)]);
  await produce(input, [rec(100), rec(900), rec(1_500)]);
  const started = Date.now();
  const out = await readAll(output, { expected: 1, timeoutMs: 30_000, settleMs: 500 });
  t.diagnostic(`window closed ${Date.now() - started} ms after the input`);
  assert.deepEqual(
    out.map((r) => JSON.parse(r.value!)),
    [{ start: 0, end: 1_000, value: 3 }],
    'the silent input (at 0) no longer holds the window [0, 1000) open',
  );
});
