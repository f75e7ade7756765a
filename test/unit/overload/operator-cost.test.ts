import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, json, string } from '../../../src/index.js';
import { OperatorCostSampler } from '../../../src/overload/operator-cost.js';
import { compileOperators, type ProcessOpFactory } from '../../../src/runtime/operators.js';
import { MutableRecordContext } from '../../../src/runtime/record-context.js';

function spin(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // busy
  }
}

test('OperatorCostSampler should time one record in 64 and charge each operator its own time only', () => {
  const app = new App({ id: 'cost' });
  app
    .stream('in', { key: string(), value: json<number>() })
    .map(
      (v) => {
        spin(1);
        return v;
      },
      { name: 'slow' },
    )
    .filter(() => true, { name: 'fast' })
    .to('out');
  const s = new OperatorCostSampler();
  let sinkCalls = 0;
  const input = compileOperators(
    app.topology().subtopologies[0]!.sources,
    new MutableRecordContext(),
    { emit: () => void sinkCalls++ },
    () => assert.fail('stateless'),
    undefined,
    undefined,
    undefined,
    s,
  ).get('in')!;
  for (let i = 0; i < 640; i++) {
    s.next();
    input.push(null, i);
  }
  assert.equal(sinkCalls, 640);
  const c = s.collect();
  assert.equal(c.get('slow')!.n, 10, 'one record in 64 timed');
  const slowMs = c.get('slow')!.ms / 10;
  const fastMs = c.get('fast')!.ms / 10;
  assert.ok(slowMs >= 0.9 && slowMs < 20, `slow costs ~1 ms itself, got ${slowMs}`);
  assert.ok(fastMs < 0.5, `fast costs ~nothing, got ${fastMs}`);
  assert.equal(s.collect().size, 0, 'counters start again');
  // The sampled records took ~1 ms: after that collection every record is timed (a few samples a
  // second would let one preempted call move the mean by a third).
  for (let i = 0; i < 64; i++) {
    s.next();
    input.push(null, i);
  }
  assert.equal(s.collect().get('slow')!.n, 64, 'every expensive record timed');
});

test('OperatorCostSampler should go back to one record in 64 once the records are cheap', () => {
  const app = new App({ id: 'cost-cheap' });
  let slow = true;
  app
    .stream('in', { key: string(), value: json<number>() })
    .map(
      (v) => {
        if (slow) spin(0.2);
        return v;
      },
      { name: 'op' },
    )
    .to('out');
  const s = new OperatorCostSampler();
  const input = compileOperators(
    app.topology().subtopologies[0]!.sources,
    new MutableRecordContext(),
    { emit() {} },
    () => assert.fail('stateless'),
    undefined,
    undefined,
    undefined,
    s,
  ).get('in')!;
  const run = (n: number) => {
    for (let i = 0; i < n; i++) {
      s.next();
      input.push(null, i);
    }
    return s.collect().get('op')?.n ?? 0;
  };
  assert.equal(run(128), 2, 'one in 64 at first');
  assert.equal(run(128), 128, 'every record while they take 0.2 ms');
  slow = false;
  assert.equal(run(128), 128, 'the collection that sees them cheap');
  assert.equal(run(640), 10, 'one in 64 again');
});

test('OperatorCostSampler should time a two-input operator from both inputs, and leave sources and merges out', () => {
  const app = new App({ id: 'cost2' });
  const right = app.stream('b', { key: string(), value: json<number>() }).byKey();
  app
    .stream('a', { key: string(), value: json<number>() })
    .byKey()
    .map((v) => v, { name: 'left' })
    .connect(right)
    .process({ onLeft() {}, onRight() {} }, { name: 'both' })
    .to('out', {}, { name: 'out' });
  const sub = app.topology().subtopologies[0]!;
  const s = new OperatorCostSampler();
  const processOp: ProcessOpFactory = (_node, down) => ({
    push() {
      throw new Error('a two-input operator takes records through side');
    },
    side: (_i, k, v) => down.push(k, v),
  });
  const ops = compileOperators(
    sub.sources,
    new MutableRecordContext(),
    { emit() {} },
    processOp,
    undefined,
    undefined,
    undefined,
    s,
  );
  for (const topic of ['a', 'b']) {
    for (let i = 0; i < 128; i++) {
      s.next();
      ops.get(topic)!.push('k', i);
    }
  }
  const c = s.collect();
  assert.deepEqual([...c.keys()].sort(), ['both', 'left', 'out'], 'sources and merges are not timed');
  assert.equal(c.get('left')!.n, 2, 'one record in 64 of the left input');
  assert.equal(c.get('both')!.n, 4, 'one in 64 of either input, in one account');
  assert.equal(c.get('out')!.n, 4);
});
