import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, hopping, json, session, sliding, string, tumbling } from '../../../src/index.js';

const keyed = (app: App) => app.stream('in', { key: string(), value: json<{ v: number }>() }).byKey();

test('window specs should reject sizes that are not positive integers and hops larger than the window', () => {
  assert.throws(() => tumbling(0), /positive integer/);
  assert.throws(() => sliding(1.5), /positive integer/);
  assert.throws(() => session(-1), /positive integer/);
  assert.throws(() => hopping(1000, 2000), /exceeds its size/);
  assert.deepEqual(hopping(1000, 250), { type: 'hopping', size: 1000, advance: 250 });
});

test('session windows should need a merge function for aggregate', () => {
  const app = new App({ id: 'w' });
  assert.throws(
    () =>
      keyed(app)
        .window(session(1000))
        .aggregate(
          () => 0,
          (a, r) => a + r.v,
        ),
    /merge function/,
  );
  keyed(new App({ id: 'w2' }))
    .window(session(1000))
    .aggregate(
      () => 0,
      (a, r) => a + r.v,
      { merge: (a, b) => a + b },
    );
});

test('a windowed operator should have a window store, a timer store and a late branch to its side output', () => {
  const app = new App({ id: 'w' });
  keyed(app).window(tumbling(1000), { grace: 10 }).late('late-topic').count({ name: 'c' }).to('out');
  const topo = app.topology();
  assert.deepEqual(
    topo.stores.map((s) => s.name),
    ['c-w', 'c-timers'],
  );
  assert.ok(topo.subtopologies[0]!.sinkTopics.includes('late-topic'));
  assert.match(topo.describe(), /c-late \(late\) -> late-topic/);
  assert.throws(
    () =>
      keyed(new App({ id: 'x' }))
        .window(tumbling(10), { grace: -1 })
        .count(),
    /grace/,
  );
});

test('joins should reject a missing window, a stream joined with itself, and the wrong arguments', () => {
  const app = new App({ id: 'j' });
  const a = keyed(app);
  const b = app.stream('in2', { key: string(), value: json<{ v: number }>() }).byKey();
  assert.throws(() => a.connect(a), /itself/);
  assert.throws(() => a.join(b, {} as any, () => 1), /within/);
  assert.throws(() => a.join({} as any, () => 1), /table or a keyed stream/);
  const users = app.table('users');
  a.join(users, (v, u) => ({ v, u })).to('out');
  a.leftJoin(users, (v, u) => ({ v, u })).to('out2');
  // The table, its stream and both joins are one sub-topology (one task per partition).
  assert.equal(app.topology().subtopologies.length, 2);
});
