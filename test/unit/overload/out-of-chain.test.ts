import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OutOfChainCost } from '../../../src/overload/estimators.js';

/** A deterministic pseudo-random sequence in [0, 1), so that a failure reproduces. */
function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 2 ** 32;
  };
}

test('OutOfChainCost should recover the per-interval, per-batch and per-record costs of synthetic intervals', () => {
  const rnd = lcg(7);
  const fit = new OutOfChainCost(60, 10, 0.02);
  // 10 ms per interval, 3 ms per batch, 0.05 ms per record, ±1 ms noise; loads from light (many
  // small batches) to shedding and saturated (few large ones).
  for (let i = 0; i < 60; i++) {
    const records = Math.round(100 + 900 * rnd());
    const batches = Math.round(1 + 30 * rnd());
    const outMs = 10 + 3 * batches + 0.05 * records + (rnd() - 0.5) * 2;
    fit.observe({ outMs, batches, records });
  }
  const f = fit.fit();
  assert.ok(f, 'a fit');
  assert.ok(Math.abs(f.perRecord - 0.05) < 0.002, `per record ${f.perRecord}`);
  assert.ok(Math.abs(f.perBatch - 3) < 0.05, `per batch ${f.perBatch}`);
  assert.ok(Math.abs(f.perInterval - 10) < 1, `per interval ${f.perInterval}`);
  assert.ok(f.perRecordSe > 0 && f.perRecordSe < 0.002, `standard error ${f.perRecordSe}`);
  // A 2 ms record: the standard error is well under 2 % of 2.05 ms, so the fit is charged.
  const b = fit.perRecordMs(2);
  assert.ok(b !== undefined && Math.abs(b - 0.05) < 0.002, `charged ${b}`);
});

test('OutOfChainCost should charge per record what a saturated worker pays, not the per-batch work of small batches', () => {
  // The shedding regime of issue 13 item 13: 2 ms records, 15 batches a second of 3 ms each,
  // 0.05 ms per record. The ratio of loop time to chain time charges the batches to the records.
  const fit = new OutOfChainCost();
  const rnd = lcg(3);
  for (let i = 0; i < 30; i++) {
    const shedding = i >= 10;
    const records = shedding ? 800 + Math.round(50 * rnd()) : 200 + Math.round(20 * rnd());
    const batches = shedding ? 10 + Math.round(10 * rnd()) : 40 + Math.round(10 * rnd());
    fit.observe({ outMs: 3 * batches + 0.05 * records + 5, batches, records });
  }
  const kept = 405;
  const chainMs = kept * 2;
  const b = fit.perRecordMs(2);
  assert.ok(b !== undefined);
  const c = kept / ((chainMs + b * kept) / 1000);
  assert.ok(Math.abs(c - 1000 / 2.05) < 1, `C ${c} is the saturated rate 1/(2 + 0.05 ms)`);
  const ratio = kept / ((chainMs + 3 * 15 + 0.05 * 800 + 5) / 1000);
  assert.ok(ratio < 0.93 * c, `the ratio would be ${ratio}: ${((1 - ratio / c) * 100).toFixed(1)} % low`);
});

test('OutOfChainCost should not fit collinear or too few intervals, and should turn away a noisy fit', () => {
  const few = new OutOfChainCost(60, 10);
  for (let i = 0; i < 9; i++) few.observe({ outMs: 50 + i, batches: 5 + i, records: 100 * i });
  assert.equal(few.fit(), undefined, 'fewer than 10 intervals');

  // One batch per 50 records, always: per batch and per record cannot be told apart.
  const collinear = new OutOfChainCost();
  for (let i = 0; i < 30; i++) {
    const records = 100 + 50 * i;
    collinear.observe({ outMs: 0.05 * records + 3 * (records / 50), batches: records / 50, records });
  }
  assert.equal(collinear.fit(), undefined, 'collinear batches and records');
  assert.equal(collinear.perRecordMs(2), undefined);

  // A steady load: records per interval about constant, so per record and per ms are nearly one
  // column; with realistic noise the standard error is far above 2 % of the record's cost.
  const rnd = lcg(11);
  const steady = new OutOfChainCost();
  for (let i = 0; i < 60; i++) {
    const records = 800 + Math.round(4 * rnd());
    const batches = 10 + Math.round(10 * rnd());
    steady.observe({
      outMs: 3 * batches + 0.05 * records + 5 + (rnd() - 0.5) * 20,
      batches,
      records,
    });
  }
  assert.equal(steady.perRecordMs(0.1), undefined, 'not trusted for a cheap record');

  // No batches at all (an idle worker): no fit.
  const idle = new OutOfChainCost();
  for (let i = 0; i < 20; i++) idle.observe({ outMs: 3, batches: 0, records: 0 });
  assert.equal(idle.fit(), undefined);
});

test('OutOfChainCost should keep a sliding window: a changed cost replaces the old one', () => {
  const fit = new OutOfChainCost(20, 10);
  const rnd = lcg(5);
  const feed = (perRecord: number, n: number) => {
    for (let i = 0; i < n; i++) {
      const records = Math.round(100 + 900 * rnd());
      const batches = Math.round(1 + 30 * rnd());
      fit.observe({ outMs: 2 * batches + perRecord * records + 4, batches, records });
    }
  };
  feed(0.02, 20);
  assert.ok(Math.abs(fit.fit()!.perRecord - 0.02) < 1e-9);
  feed(0.08, 20);
  assert.ok(Math.abs(fit.fit()!.perRecord - 0.08) < 1e-9);
});

test('OutOfChainCost should leave out one-off loop time (a worker starting, a stalled machine)', () => {
  const rnd = lcg(13);
  const fit = new OutOfChainCost(60, 10, 0.02, 0); // no warm-up skip: the trimming must do it
  // The first interval of a worker: 770 ms of compiling and joining for 3 batches of 127 records.
  fit.observe({ outMs: 770, batches: 3, records: 127 });
  for (let i = 0; i < 30; i++) {
    const records = Math.round(150 + 700 * rnd());
    const batches = Math.round(2 + 45 * rnd());
    fit.observe({ outMs: 15 + 4 * batches + 0.03 * records + (rnd() - 0.5) * 10, batches, records });
  }
  const f = fit.fit()!;
  assert.ok(Math.abs(f.perRecord - 0.03) < 0.01, `per record ${f.perRecord}`);
  assert.ok(Math.abs(f.perBatch - 4) < 0.3, `per batch ${f.perBatch}`);
});

test("OutOfChainCost should leave out a starting worker's first intervals with batches", () => {
  const fit = new OutOfChainCost(60, 3, 0.02, 2);
  fit.observe({ outMs: 5, batches: 0, records: 0 }); // idle before the first batch: kept
  fit.observe({ outMs: 900, batches: 3, records: 100 });
  fit.observe({ outMs: 800, batches: 5, records: 300 });
  for (const [b, r] of [
    [10, 100],
    [2, 900],
    [30, 400],
    [5, 50],
  ] as const)
    fit.observe({ outMs: 5 + 2 * b + 0.01 * r, batches: b, records: r });
  const f = fit.fit()!;
  assert.ok(Math.abs(f.perRecord - 0.01) < 1e-9 && Math.abs(f.perBatch - 2) < 1e-9, JSON.stringify(f));
});
