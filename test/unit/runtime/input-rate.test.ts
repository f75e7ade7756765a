import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { createWorkerMetrics, METRIC } from '../../../src/ops/metrics.js';
import { checkpointSize } from '../../../src/runtime/checkpoint-size.js';
import { InputRateMeter } from '../../../src/runtime/input-rate.js';

async function rateOf(registry: Registry, partition: string): Promise<number | undefined> {
  const m = await registry.getSingleMetric(METRIC.inputRate.name)!.get();
  return m.values.find((v) => v.labels.partition === partition)?.value;
}

test('InputRateMeter should report records per second over a window of about 5 s', async () => {
  const registry = new Registry();
  const meter = new InputRateMeter(createWorkerMetrics(registry), 'app');
  let now = 1_000_000;
  meter.tick(now);
  // 100 records a second on partition 0, for 10 s; partition 1 stays idle after 50 records.
  meter.add('in', 1, 50, now);
  for (let s = 1; s <= 10; s++) {
    meter.add('in', 0, 100, now + s * 1000 - 500);
    now += 1000;
    meter.tick(now);
  }
  assert.equal(await rateOf(registry, '0'), 100);
  assert.equal(await rateOf(registry, '1'), 0, 'an idle partition decays to 0 once its window passed');
});

test('InputRateMeter should refresh at most once a second and drop removed partitions', async () => {
  const registry = new Registry();
  const meter = new InputRateMeter(createWorkerMetrics(registry), 'app');
  const t0 = 5_000_000;
  meter.tick(t0);
  meter.add('in', 3, 10, t0);
  meter.tick(t0 + 500);
  assert.equal(await rateOf(registry, '3'), undefined, 'no refresh within a second');
  meter.tick(t0 + 1000);
  assert.equal(await rateOf(registry, '3'), 10);
  meter.remove('in', 3);
  assert.equal(await rateOf(registry, '3'), undefined);
});

test('checkpointSize should count records and key + value bytes, tombstones included', () => {
  const s = checkpointSize([
    [
      { key: Buffer.from('ab'), value: Buffer.from('xyz') },
      { key: null, value: Buffer.from('1234') },
    ],
    [{ key: Buffer.from('k'), value: null }],
  ]);
  assert.deepEqual(s, { records: 3, bytes: 10 });
});
