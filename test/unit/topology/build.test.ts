import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TopologyError } from '../../../src/errors.js';
import { App, json, string, valueState } from '../../../src/index.js';

const serdes = { key: string(), value: json<{ n: number }>() };

/**
 * A keyed `process` named `name` with one state named `stateName`: its store is
 * `<name>-<stateName>`, so `sum` with `x-acc` and `sum-x` with `acc` share a store name.
 */
function summing(app: App, topic: string, name: string, out: string, stateName = 'acc'): void {
  app
    .keyedStream(topic, serdes)
    .process<number, any>(
      {
        state: { [stateName]: valueState<number>() },
        onRecord(v, ctx) {
          const s = ctx.state[stateName];
          s.set((s.get() ?? 0) + v.n);
        },
      },
      { name },
    )
    .to(out, { key: string(), value: json() });
}

test('a job with one topology problem should fail with that problem alone', () => {
  const app = new App({ id: 'one' });
  summing(app, 'a', 'sum-x', 'out-a');
  summing(app, 'b', 'sum', 'out-b', 'x-acc');
  assert.throws(
    () => app.topology(),
    (e: unknown) =>
      e instanceof TopologyError &&
      e.code === 'SLUICE_TOPOLOGY_INVALID' &&
      e.message === 'duplicate store name sum-x-acc',
  );
});

test('a job with several topology problems should fail with every one listed', () => {
  const app = new App({ id: 'many' });
  summing(app, 'a', 'sum-x', 'out-a');
  summing(app, 'b', 'sum', 'out-b', 'x-acc');
  app.stream('c', serdes).to('out-c', serdes);
  app.stream('c', serdes).to('out-d', serdes);
  app.stream('loop', serdes).to('loop', serdes);
  assert.throws(
    () => app.topology(),
    (e: unknown) => {
      assert.ok(e instanceof TopologyError);
      assert.match(e.message, /^the job's topology has 3 problems:/);
      assert.match(e.message, /\n {2}- duplicate store name sum-x-acc/);
      assert.match(e.message, /\n {2}- topic c is read by two streams; read it once and branch/);
      assert.match(e.message, /\n {2}- sub-topology \d+ writes loop, which it also reads \(a cycle\)/);
      return true;
    },
  );
});

test('a topic read by several streams should be one problem, and a cycle in its second reader another', () => {
  const app = new App({ id: 'readers' });
  app.stream('c', serdes).to('x', serdes);
  app.stream('c', serdes).to('c', serdes);
  app.stream('c', serdes).to('y', serdes);
  assert.throws(
    () => app.topology(),
    (e: unknown) => {
      assert.ok(e instanceof TopologyError);
      assert.match(e.message, /^the job's topology has 2 problems:/);
      assert.equal(e.message.match(/read by two streams/g)?.length, 1);
      assert.match(e.message, /writes c, which it also reads \(a cycle\)/);
      return true;
    },
  );
});

test('a job without problems should build', () => {
  const app = new App({ id: 'fine' });
  summing(app, 'a', 'sum-a', 'out-a');
  summing(app, 'b', 'sum-b', 'out-b');
  const t = app.topology();
  assert.deepEqual(
    t.stores.map((s) => s.name),
    ['sum-a-acc', 'sum-b-acc'],
  );
});
