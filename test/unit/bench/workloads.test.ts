import assert from 'node:assert/strict';
import { test } from 'node:test';
import { svgChart } from '../../../bench/lib/report.js';
import { eventMaker, prng, userRow, zipf } from '../../../bench/workloads.js';

test('bench workloads should be the same records on every run', () => {
  const a = eventMaker(42, { keys: 1000, dist: 'zipf' });
  const b = eventMaker(42, { keys: 1000, dist: 'zipf' });
  for (let i = 0; i < 500; i++) assert.deepEqual(a(i), b(i));
  const c = eventMaker(43, { keys: 1000, dist: 'zipf' });
  assert.notDeepEqual(
    Array.from({ length: 50 }, (_, i) => a(1000 + i).key),
    Array.from({ length: 50 }, (_, i) => c(1000 + i).key),
  );
});

test('bench records should be JSON of 100 to 200 bytes keyed by their user', () => {
  const make = eventMaker(1, { keys: 1_000_000, dist: 'uniform' });
  for (let i = 0; i < 2000; i += 97) {
    const r = make(i * 1000);
    const len = Buffer.byteLength(r.value);
    assert.ok(len >= 100 && len <= 200, `record of ${len} bytes`);
    assert.equal(JSON.parse(r.value).user, r.key);
  }
  assert.equal(JSON.parse(userRow(7).value).user, userRow(7).key);
});

test('zipf should favour low ranks with s = 1.1 and stay in range', () => {
  const next = zipf(1000, 1.1, prng(7));
  const counts = new Array(1000).fill(0);
  for (let i = 0; i < 100_000; i++) {
    const k = next();
    assert.ok(k >= 0 && k < 1000);
    counts[k]++;
  }
  // P(rank 0) = 1 / H(1000, 1.1) ≈ 0.19; rank 1 about 2^-1.1 of it.
  assert.ok(counts[0] > 16_000 && counts[0] < 22_000, `rank 0 drawn ${counts[0]} times`);
  assert.ok(Math.abs(counts[1] / counts[0] - 2 ** -1.1) < 0.05);
});

test('sequential keys should visit every key once per round', () => {
  const make = eventMaker(1, { keys: 10, dist: 'sequential' });
  assert.deepEqual(
    Array.from({ length: 20 }, (_, i) => make(i).key),
    [...Array.from({ length: 10 }, (_, i) => `u${i}`), ...Array.from({ length: 10 }, (_, i) => `u${i}`)],
  );
});

test('svgChart should draw one bar per successful run at its steady rate, ceilings included', () => {
  const base = {
    records: 1,
    recordsOut: 1,
    seconds: 1,
    cpuPerMillion: 1,
    hwmBytes: 1,
    startSeconds: 1,
    ksCache: 'off',
    throughput: 1,
  };
  const svg = svgChart(
    [
      { ...base, workload: 'map-filter', system: 'sluice', guarantee: 'exactly_once', steadyThroughput: 100 },
      {
        ...base,
        workload: 'map-filter',
        system: 'kafka-streams',
        guarantee: 'exactly_once',
        steadyThroughput: 50,
      },
      {
        ...base,
        workload: 'join',
        system: 'sluice',
        guarantee: 'exactly_once',
        steadyThroughput: Number.NaN,
        error: 'x',
      },
      { ...base, workload: 'decode only', system: 'ceiling: kafkajs', guarantee: '—', steadyThroughput: 400 },
    ],
    'a <title>',
  );
  assert.ok(svg.startsWith('<svg'));
  assert.ok(svg.includes('a &lt;title&gt;'));
  assert.equal((svg.match(/<rect x="230" y="\d+" width="[\d.]+" height="9"/g) ?? []).length, 3);
  assert.ok(svg.includes('>400<'));
  assert.ok(!svg.includes('NaN'));
});
