import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import {
  createWorkerMetrics,
  DEAD_LETTER_REASONS,
  ERROR_KINDS,
  initWorkerMetrics,
  METRIC,
} from '../../../src/ops/metrics.js';

/** Labels a metric may carry: bounded sets only, never a record key. */
const ALLOWED_LABELS = new Set([
  'app',
  'task',
  'topic',
  'partition',
  'operator',
  'reason',
  'store',
  'state',
  'kind',
  'action',
  'phase', // a transaction's: queued, begin, produce, offsets, end
]);

test('createWorkerMetrics should register every METRIC with bounded labels only', async () => {
  const registry = new Registry();
  createWorkerMetrics(registry);
  const registered = new Map((await registry.getMetricsAsJSON()).map((m) => [m.name, m]));
  for (const { name } of Object.values(METRIC)) {
    assert.ok(registered.has(name), `${name} is not registered`);
    assert.match(name, /^sluice_[a-z0-9_]+$/);
  }
  for (const metric of registry.getMetricsAsArray()) {
    const labels: string[] = (metric as any).labelNames ?? [];
    for (const l of labels) assert.ok(ALLOWED_LABELS.has(l), `${metric.name} has label ${l}`);
  }
});

test('initWorkerMetrics should create zero series for error kinds, dead-letter reasons and counters', async () => {
  const registry = new Registry();
  const m = createWorkerMetrics(registry);
  initWorkerMetrics(m, 'a1');
  const errors = (await m.errors.get()).values;
  assert.deepEqual(errors.map((v) => v.labels.kind).sort(), [...ERROR_KINDS].sort());
  assert.ok(errors.every((v) => v.value === 0 && v.labels.app === 'a1'));
  const dlq = (await m.recordsDeadLettered.get()).values;
  assert.deepEqual(dlq.map((v) => v.labels.reason).sort(), [...DEAD_LETTER_REASONS].sort());
  for (const c of [m.checkpoints, m.rebalances, m.txCommits, m.txAborts, m.cacheHits, m.cacheMisses]) {
    const v = (await c.get()).values;
    assert.equal(v.length, 1, `${(await c.get()).name} has one series`);
    assert.equal(v[0]!.value, 0);
  }
});
