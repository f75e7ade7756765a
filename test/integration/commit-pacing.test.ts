import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Registry } from 'prom-client';
import { json, string } from 'sluice';
import { METRIC } from '../../src/ops/metrics.js';
import { readAll, testKafka } from '../helpers/kafka.js';
import { inProcessApp } from '../helpers/workers.js';

async function checkpoints(registry: Registry): Promise<number> {
  const m = await registry.getSingleMetric(METRIC.checkpoints.name)!.get();
  return m.values.reduce((n, v) => n + v.value, 0);
}

/**
 * A worker under exactly-once fed a trickle (a record every 5 ms, one partition, its event loop
 * mostly idle): how many checkpoints it makes per second, read from its own counter over the
 * middle of the feed, and whether every output is there once for a read_committed reader.
 */
async function trickle(t: Parameters<typeof inProcessApp>[0], processing: Record<string, unknown>) {
  const { input, output, app, start } = await inProcessApp(t, 't-pace', 1);
  app
    .stream(input, { key: string(), value: json<number>() })
    .map((v) => v * 2)
    .to(output, { value: json() });
  const w = await start('warn', { guarantee: 'exactly_once', ...processing });
  const p = testKafka().producer({ idempotent: true, maxInFlightRequests: 1 });
  await p.connect();
  const total = 600;
  let c0 = 0;
  let t0 = 0;
  let c1 = 0;
  let t1 = 0;
  try {
    for (let i = 0; i < total; i++) {
      await p.send({ topic: input, acks: -1, messages: [{ key: `k${i % 7}`, value: String(i) }] });
      await new Promise((r) => setTimeout(r, 5));
      if (i === 150) [c0, t0] = [await checkpoints(w.registry), Date.now()];
      if (i === 450) [c1, t1] = [await checkpoints(w.registry), Date.now()];
    }
  } finally {
    await p.disconnect();
  }
  const count = c1 - c0;
  const ms = t1 - t0;
  t.diagnostic(`${count} checkpoints in ${ms} ms: ${((count * 1000) / ms).toFixed(1)} per second`);
  const out = await readAll(output, { expected: total, timeoutMs: 30_000, settleMs: 500 });
  assert.deepEqual(
    out.map((r) => Number(r.value)).sort((a, b) => a - b),
    Array.from({ length: total }, (_, i) => i * 2),
    'every output once, read_committed',
  );
  return { count, ms };
}

test('exactly-once: a worker with time to spare commits more often than the 100 ms interval', {
  timeout: 120_000,
}, async (t) => {
  const { count, ms } = await trickle(t, {});
  // The interval alone allows one per 100 ms (+1 at the window's edges); a mostly idle loop gives a
  // spacing near minCommitIntervalMs (20 ms), one busy 80 % of the time 80 ms.
  assert.ok(count > ms / 80 + 1, `${count} checkpoints in ${ms} ms: more than one per 100 ms`);
});

test('exactly-once: minCommitIntervalMs at the interval commits on the interval only, as Kafka Streams', {
  timeout: 120_000,
}, async (t) => {
  const { count, ms } = await trickle(t, { minCommitIntervalMs: 100 });
  assert.ok(count <= ms / 100 + 1, `${count} checkpoints in ${ms} ms: at most one per 100 ms`);
});
