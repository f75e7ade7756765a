import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ArrivalRate, Capacity, Ewma } from '../../../src/overload/estimators.js';
import { demand, recommendWorkers, shedFraction, smoothShed } from '../../../src/overload/policy.js';
import { TaskShedder } from '../../../src/overload/shedder.js';

test('shedFraction should be 1 − H·C/(λ + lag/τ) for one task and 0 under the headroom', () => {
  const u = demand([{ lambda: 2000, lag: 500, capacity: 1000 }], 2.5);
  assert.equal(u, 2.2);
  assert.ok(Math.abs(shedFraction(u, 0.9) - (1 - (0.9 * 1000) / (2000 + 500 / 2.5))) < 1e-12);
  assert.equal(shedFraction(demand([{ lambda: 800, lag: 0, capacity: 1000 }], 1), 0.9), 0);
  assert.equal(shedFraction(0, 0.9), 0);
});

test('demand should add the busy seconds of the tasks sharing a worker and skip unmeasured ones', () => {
  const u = demand(
    [
      { lambda: 500, lag: 0, capacity: 1000 },
      { lambda: 300, lag: 100, capacity: 500 },
      { lambda: 1e6, lag: 0, capacity: undefined },
    ],
    1,
  );
  assert.ok(Math.abs(u - (0.5 + 0.8)) < 1e-12);
});

test('smoothShed should smooth p and snap to 0 once the raw fraction is 0 and p is small', () => {
  let p = 0;
  p = smoothShed(p, 0.5, 0.5);
  assert.equal(p, 0.25);
  p = smoothShed(p, 0.5, 0.5);
  assert.equal(p, 0.375);
  let steps = 0;
  while (p > 0) {
    p = smoothShed(p, 0, 0.5);
    steps++;
  }
  assert.ok(steps <= 5, `stops within 5 evaluations, took ${steps}`);
});

test('recommendWorkers should be DS2: ceil(demand / H), clamped to [1, partitions]', () => {
  assert.equal(recommendWorkers(2.5, 0.9, 6), 3);
  assert.equal(recommendWorkers(2.7, 0.9, 6), 3);
  assert.equal(recommendWorkers(2.71, 0.9, 6), 4);
  assert.equal(recommendWorkers(0.2, 0.9, 6), 1);
  assert.equal(recommendWorkers(0, 0.9, 6), 1);
  assert.equal(recommendWorkers(50, 0.9, 6), 6);
});

test('ArrivalRate should measure log-end growth per second and restart when the log end goes back', () => {
  const r = new ArrivalRate(1);
  assert.equal(r.observe(1000n, 0), undefined);
  assert.equal(r.observe(3000n, 1000), 2000);
  assert.equal(r.observe(3500n, 2000), 500);
  assert.equal(r.observe(10n, 3000), undefined);
  assert.equal(r.observe(110n, 3500), 200);
});

test('Capacity should be records per busy second, sampled once enough busy time accumulated', () => {
  const c = new Capacity(1, 20);
  assert.equal(c.observe(5, 5), undefined);
  assert.equal(c.observe(15, 15), 1000);
  assert.equal(c.observe(100, 50), 2000);
  const e = new Ewma(0.5);
  e.update(10);
  assert.equal(e.update(20), 15);
  assert.throws(() => new Ewma(0));
});

test('TaskShedder random drops should shed about p of the records and count them', () => {
  const s = new TaskShedder({ mode: 'shed', placement: 'source', drop: 'random', overflowTopic: 'x' });
  s.setFraction(0.3);
  let dropped = 0;
  for (let i = 0; i < 20_000; i++) if (s.dropRandom()) dropped++;
  assert.ok(Math.abs(dropped / 20_000 - 0.3) < 0.02, `dropped ${dropped / 20_000}`);
  assert.equal(s.collect().shed, dropped);
  assert.equal(s.collect().shed, 0);
});

test('TaskShedder in backpressure mode should never shed', () => {
  const s = new TaskShedder({
    mode: 'backpressure',
    placement: 'source',
    drop: 'random',
    overflowTopic: 'x',
  });
  s.setFraction(0.9);
  assert.equal(s.p, 0);
  for (let i = 0; i < 1000; i++) assert.equal(s.dropRandom(), false);
});

test('TaskShedder priority drops should shed the lowest priorities first, exactly p with ties', () => {
  const s = new TaskShedder({ mode: 'shed', placement: 'operator', drop: 'priority', overflowTopic: 'x' });
  // Warm the window with priorities 0..3, evenly.
  for (let i = 0; i < 4096; i++) s.dropByPriority(i % 4);
  s.setFraction(0.375); // all of 0 (25 %) and half of 1
  const dropped = [0, 0, 0, 0];
  const n = 40_000;
  for (let i = 0; i < n; i++) if (s.dropByPriority(i % 4)) dropped[i % 4]!++;
  const per = n / 4;
  assert.equal(dropped[0], per, 'every priority-0 record shed');
  assert.ok(Math.abs(dropped[1]! / per - 0.5) < 0.05, `half of priority 1: ${dropped[1]! / per}`);
  assert.equal(dropped[2], 0);
  assert.equal(dropped[3], 0);
  const total = dropped.reduce((a, b) => a + b, 0) / n;
  assert.ok(Math.abs(total - 0.375) < 0.02, `total ${total}`);
});

test("TaskShedder should report the busier of the synchronous chain and the async stages as the task's busy time", () => {
  const s = new TaskShedder({ mode: 'shed', placement: 'source', drop: 'random', overflowTopic: 'x' });
  // 100 records: 20 ms of CPU in the chain, and 100 × 50 ms in a stage of concurrency 10 (500 ms).
  s.processed = 100;
  s.busyMs = 20;
  s.asyncBusyMs = (100 * 50) / 10;
  const c = s.collect();
  assert.equal(c.busyMs, 500, 'the stage bounds C: 100 records per 0.5 s = concurrency / latency');
  assert.equal(new Capacity(1, 1).observe(c.processed, c.busyMs), 200);
  s.processed = 100;
  s.busyMs = 300;
  s.asyncBusyMs = 50;
  assert.equal(s.collect().busyMs, 300, 'a CPU-bound chain bounds it otherwise');
  assert.equal(s.collect().busyMs, 0, 'counters start again');
});
