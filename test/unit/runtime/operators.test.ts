import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OperatorError } from '../../../src/errors.js';
import { App, json, string } from '../../../src/index.js';
import { compileOperators, type ProcessOpFactory } from '../../../src/runtime/operators.js';
import { MutableRecordContext } from '../../../src/runtime/record-context.js';

/**
 * Two sources (each through `byKey`, a merge), a map on the left, a filter on the right, a
 * two-input operator joining them, a map after it and a sink. Values pick where a record fails:
 * -1 in `inc`, 13 in `both`, 99 in `after`, 7 (a string, not an Error) in `inc`.
 */
function compile() {
  const app = new App({ id: 'ops' });
  const right = app
    .stream('b', { key: string(), value: json<number>() })
    .byKey()
    .filter((v) => v >= 0, { name: 'pos' });
  app
    .stream('a', { key: string(), value: json<number>() })
    .byKey()
    .map(
      (v) => {
        if (v === -1) throw new Error('minus one');
        if (v === 7) throw 'seven';
        return v;
      },
      { name: 'inc', onError: 'dlq' },
    )
    .connect(right)
    .process({ onLeft() {}, onRight() {} }, { name: 'both' })
    .map(
      (v) => {
        if ((v as [number, number])[1] === 99) throw new Error('ninety-nine');
        return v;
      },
      { name: 'after', onError: 'skip' },
    )
    .to('out', {}, { name: 'out' });
  const sub = app.topology().subtopologies[0]!;
  // A stand-in for the task's stateful operator: a two-input one passes (side, value) on.
  const processOp: ProcessOpFactory = (_node, down) => ({
    push() {
      throw new Error('a two-input operator takes records through side');
    },
    side(i, k, v) {
      if (v === 13) throw new Error('thirteen');
      down.push(k, [i, v]);
    },
  });
  const counts = new Float64Array(sub.nodes.length + 2);
  const sunk: unknown[] = [];
  const ops = compileOperators(
    sub.sources,
    new MutableRecordContext(),
    { emit: (_t, _k, v) => void sunk.push(JSON.parse(v!.toString())) },
    processOp,
    undefined,
    counts,
  );
  // Sources and merges by where they are: 'source a', 'merge a' (its byKey).
  const node = (name: string) => {
    const [kind, topic] = name.split(' ');
    const source = topic === undefined ? undefined : sub.sources.get(topic)!;
    if (kind === 'source') return source!;
    if (kind === 'merge') return source!.children[0]!;
    return sub.nodes.find((n) => n.name === name)!;
  };
  const count = (name: string) => counts[node(name).id];
  return { a: ops.get('a')!, b: ops.get('b')!, counts, count, sunk };
}

function fails(push: () => void): OperatorError {
  try {
    push();
  } catch (e) {
    assert.ok(e instanceof OperatorError, `an OperatorError, got ${String(e)}`);
    return e;
  }
  assert.fail('did not throw');
}

test('compileOperators should count the records into every operator, sources, merges and both inputs alike', () => {
  const c = compile();
  for (let i = 0; i < 3; i++) c.a.push('k', i);
  for (let i = -2; i < 3; i++) c.b.push('k', i);
  assert.deepEqual(c.sunk, [
    [0, 0],
    [0, 1],
    [0, 2],
    [1, 0],
    [1, 1],
    [1, 2],
  ]);
  assert.equal(c.count('source a'), 3);
  assert.equal(c.count('source b'), 5);
  assert.equal(c.count('merge a'), 3);
  assert.equal(c.count('merge b'), 5);
  assert.equal(c.count('inc'), 3);
  assert.equal(c.count('pos'), 5);
  assert.equal(c.count('both'), 6, 'a two-input operator counts the records of both inputs, once each');
  assert.equal(c.count('after'), 6);
  assert.equal(
    c.counts.reduce((a, b) => a + b, 0),
    3 + 3 + 3 + 5 + 5 + 5 + 6 + 6 + 6,
    'nothing else counted',
  );
});

test('compileOperators should name the operator that threw, with its policy, and pass errors from downstream on', () => {
  const c = compile();
  const inc = fails(() => c.a.push('k', -1));
  assert.equal(inc.operator, 'inc');
  assert.equal(inc.policy, 'dlq');
  assert.equal((inc.cause as Error).message, 'minus one');
  const thrown = fails(() => c.a.push('k', 7));
  assert.equal(thrown.operator, 'inc');
  assert.equal(thrown.cause, 'seven', 'a non-Error is kept as the cause');
  const both = fails(() => c.b.push('k', 13));
  assert.equal(both.operator, 'both', 'a two-input operator is named from either input');
  assert.equal(both.policy, undefined);
  const after = fails(() => c.a.push('k', 99));
  assert.equal(after.operator, 'after', 'named where it was thrown, not by the operators it passed through');
  assert.equal(after.policy, 'skip');
  assert.equal((after.cause as Error).message, 'ninety-nine');
  assert.equal(fails(() => c.b.push('k', 99)).operator, 'after');
  // A record is counted by every operator it reached, the failing one included.
  assert.equal(c.count('inc'), 3);
  assert.equal(c.count('both'), 3);
  assert.equal(c.count('after'), 2);
  assert.equal(c.count('out'), 0);
  assert.equal(c.count('source a'), 3);
  assert.equal(c.count('merge b'), 2);
  assert.deepEqual(c.sunk, []);
});
