import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Histogram, Registry } from 'prom-client';
import { HistogramTally } from '../../../src/ops/histogram-tally.js';

const BUCKETS = [0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1, 10];

function pair() {
  const make = () => {
    const registry = new Registry();
    const h = new Histogram({
      name: 'lat_seconds',
      help: 'h',
      labelNames: ['app', 'topic'],
      buckets: BUCKETS,
      registers: [registry],
    });
    return { registry, h };
  };
  return { theirs: make(), ours: make() };
}

/** The exposition text with each _sum rounded (the tally adds in another order). */
async function text(r: Registry): Promise<string> {
  return (await r.metrics()).replace(
    /(_sum\{[^}]*\}) ([0-9.e+-]+)/g,
    (_, k, v) => `${k} ${Number(v).toFixed(9)}`,
  );
}

test('a tally folded into prom-client exports what one observe per value does', async () => {
  const { theirs, ours } = pair();
  const tally = new HistogramTally(ours.h);
  // Bounds themselves (v <= bound is that bucket), between, beyond the last, zero.
  const values = [0, 0.005, 0.0051, 0.01, 0.3, 1, 10, 10.001, 55, ...BUCKETS.map((b) => b / 3)];
  for (let round = 0; round < 3; round++) {
    for (const topic of ['a', 'b']) {
      for (const v of values.slice(round)) {
        theirs.h.observe({ app: 'x', topic }, v);
        tally.add(v);
      }
      tally.foldInto({ app: 'x', topic });
    }
    assert.equal(await text(ours.registry), await text(theirs.registry));
  }
  // A fold with nothing observed makes no series, as no observe does not.
  tally.foldInto({ app: 'x', topic: 'none' });
  assert.doesNotMatch(await ours.registry.metrics(), /topic="none"/);
  // After a reset (registry.resetMetrics), the next fold starts a new series.
  ours.registry.resetMetrics();
  theirs.registry.resetMetrics();
  tally.add(0.02);
  theirs.h.observe({ app: 'x', topic: 'a' }, 0.02);
  tally.foldInto({ app: 'x', topic: 'a' });
  assert.equal(await text(ours.registry), await text(theirs.registry));
  assert.throws(() => tally.add(Number.NaN), TypeError);
});
