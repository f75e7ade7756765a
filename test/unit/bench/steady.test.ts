import assert from 'node:assert/strict';
import { test } from 'node:test';
import { svgLineChart } from '../../../bench/lib/report.js';
import { outputsCheck, percentile, steadyRate, timeAt } from '../../../bench/lib/steady.js';

test('timeAt should interpolate between the samples that bracket the target', () => {
  const s = [
    { at: 0, committed: 0 },
    { at: 100, committed: 0 },
    { at: 200, committed: 400 },
    { at: 300, committed: 1000 },
  ];
  assert.equal(timeAt(s, 100), 125);
  assert.equal(timeAt(s, 400), 200);
  assert.equal(timeAt(s, 700), 250);
  assert.ok(Number.isNaN(timeAt(s, 1001)), 'never reached');
  assert.ok(Number.isNaN(timeAt([{ at: 5, committed: 50 }], 10)), 'nothing below the target');
});

test('steadyRate should be the rate between 10 % and 90 % committed, leaving out a slow start and end', () => {
  // 1 s of start-up with nothing committed, then 1,000 records/ms for 1 s (all of it), then idle.
  const s = [{ at: 0, committed: 0 }];
  for (let t = 1000; t <= 2000; t += 100) s.push({ at: t, committed: (t - 1000) * 1000 });
  s.push({ at: 5000, committed: 1_000_000 });
  assert.equal(Math.round(steadyRate(s, 1_000_000)), 1_000_000);
  // The whole-run average would be 200,000/s: the headline must not be it.
  assert.ok(Number.isNaN(steadyRate([{ at: 0, committed: 0 }], 1000)));
});

test('outputsCheck should flag any difference between the systems and from the expected count', () => {
  const ks = { system: 'kafka-streams', recordsOut: 1000 };
  assert.equal(outputsCheck([{ system: 'sluice', recordsOut: 1000 }, ks], 1000).ok, true);
  const diff = outputsCheck([{ system: 'sluice', recordsOut: 999 }, ks]);
  assert.equal(diff.ok, false);
  assert.match(diff.message, /differ: sluice 999, kafka-streams 1000/);
  assert.equal(
    outputsCheck(
      [
        { system: 'sluice', recordsOut: 900 },
        { ...ks, recordsOut: 900 },
      ],
      1000,
    ).ok,
    false,
  );
  assert.equal(outputsCheck([{ system: 'sluice', recordsOut: Number.NaN }, ks]).ok, false);
});

test('percentile should pick the rank, not average', () => {
  const xs = Array.from({ length: 100 }, (_, i) => 100 - i);
  assert.equal(percentile(xs, 50), 51);
  assert.equal(percentile(xs, 99), 100);
  assert.ok(Number.isNaN(percentile([], 50)));
});

test('svgLineChart should draw one line per series on a log axis and skip missing points', () => {
  const svg = svgLineChart(
    [
      {
        name: 'a p50',
        color: '#111',
        points: [
          [10, 50],
          [50, 120],
          [75, Number.NaN],
        ],
      },
      {
        name: 'b p99',
        color: '#222',
        dashed: true,
        points: [
          [10, 300],
          [50, 4000],
        ],
      },
    ],
    { title: 'lat', xLabel: 'x', yLabel: 'ms' },
  );
  assert.equal((svg.match(/<polyline/g) ?? []).length, 2);
  assert.equal((svg.match(/<circle/g) ?? []).length, 4);
  assert.ok(svg.includes('>5,000<') || svg.includes('>10,000<'), 'the y axis reaches past 4,000 ms');
  assert.ok(!svg.includes('NaN'));
});
