import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, json, tumbling } from '../../../src/index.js';
import { assignTasks } from '../../../src/kafka/task-assigner.js';

test('topology should split at a repartition topic and name internal topics after the app', () => {
  const app = new App({ id: 'shop' });
  app
    .stream('orders', { value: json<{ user: string; amount: number }>() })
    .filter((o) => o.amount > 0)
    .keyBy((o) => o.user, { name: 'by-user' })
    .count({ name: 'orders-per-user' })
    .to('counts');
  const t = app.topology();
  assert.equal(t.subtopologies.length, 2);
  assert.deepEqual(t.subtopologies[0]!.sourceTopics, ['orders']);
  assert.deepEqual(t.subtopologies[1]!.sourceTopics, ['shop-by-user-repartition']);
  assert.deepEqual([...t.repartitionTopics.keys()], ['shop-by-user-repartition']);
  assert.deepEqual(
    t.stores.map((s) => s.changelog),
    ['shop-orders-per-user-agg-changelog'],
  );
  assert.match(t.describe(), /Sub-topology 1/);
});

test('topology should put merged sources in one sub-topology', () => {
  const app = new App({ id: 'm' });
  const a = app.stream('a');
  const b = app.stream('b');
  a.merge(b).to('c');
  const t = app.topology();
  assert.equal(t.subtopologies.length, 1);
  assert.deepEqual([...t.subtopologies[0]!.sourceTopics].sort(), ['a', 'b']);
});

test("a topology's fingerprint should name its task layout: same for the same sources, changed when they move", () => {
  const build = (merged: boolean, extra = false) => {
    const app = new App({ id: 'm' });
    const a = app.stream('a');
    const b = app.stream('b');
    if (merged) {
      const s = a.merge(b);
      (extra ? s.filter(() => true) : s).to('c');
    } else {
      a.to('c');
      b.to('d');
    }
    return app.topology().fingerprint;
  };
  assert.match(build(true), /^[0-9a-f]{16}$/);
  assert.equal(build(true), build(true));
  assert.equal(build(true), build(true, true), 'an operator added inside a sub-topology moves no task');
  assert.notEqual(build(true), build(false), 'sources split into two sub-topologies: other tasks');
});

test('app should refuse an invalid id and a duplicate operator name', () => {
  assert.throws(() => new App({ id: 'has space' }), /App id/);
  const app = new App({ id: 'x' });
  const s = app.stream('a').map((v) => v, { name: 'same' });
  assert.throws(() => s.map((v) => v, { name: 'same' }), /duplicate operator name "same"/);
});

test('task assignment should balance tasks and keep them with their previous owners', () => {
  const tasks = ['0_0', '0_1', '0_2', '0_3', '1_0', '1_1', '1_2', '1_3'];
  const first = assignTasks([{ memberId: 'a', info: { tasks: [] } }], tasks);
  assert.deepEqual(first.get('a')!.sort(), [...tasks].sort());
  const two = assignTasks(
    [
      { memberId: 'a', info: { tasks } },
      { memberId: 'b', info: { tasks: [] } },
    ],
    tasks,
  );
  assert.equal(two.get('a')!.length, 4);
  assert.equal(two.get('b')!.length, 4);
  const three = assignTasks(
    [
      { memberId: 'a', info: { tasks: two.get('a')! } },
      { memberId: 'b', info: { tasks: two.get('b')! } },
      { memberId: 'c', info: { tasks: [] } },
    ],
    tasks,
  );
  const sizes = ['a', 'b', 'c'].map((m) => three.get(m)!.length).sort();
  assert.deepEqual(sizes, [2, 3, 3]);
  for (const m of ['a', 'b'])
    for (const t of three.get(m)!) assert.ok(two.get(m)!.includes(t), `${t} stayed with ${m}`);
  const all = ['a', 'b', 'c'].flatMap((m) => three.get(m)!).sort();
  assert.deepEqual(all, [...tasks].sort(), 'every task assigned once');
});

test('task assignment should spread every sub-topology over the members', () => {
  const tasks = ['0_0', '0_1', '0_2', '0_3', '1_0', '1_1', '1_2', '1_3'];
  // b owned all of sub-topology 1 before: it keeps half of it, a gets the other half.
  const plan = assignTasks(
    [
      { memberId: 'a', info: { tasks: ['0_0', '0_1', '0_2', '0_3'] } },
      { memberId: 'b', info: { tasks: ['1_0', '1_1', '1_2', '1_3'] } },
    ],
    tasks,
  );
  for (const m of ['a', 'b']) {
    const mine = plan.get(m)!;
    assert.equal(mine.filter((t) => t.startsWith('0_')).length, 2, `${m} has two tasks of sub-topology 0`);
    assert.equal(mine.filter((t) => t.startsWith('1_')).length, 2, `${m} has two tasks of sub-topology 1`);
  }
  assert.ok(plan.get('a')!.every((t) => t.startsWith('1_') || ['0_0', '0_1', '0_2', '0_3'].includes(t)));
  // Three members, three sub-topologies of 2 tasks: 2 each in total.
  const six = ['0_0', '0_1', '1_0', '1_1', '2_0', '2_1'];
  const p3 = assignTasks(
    ['a', 'b', 'c'].map((memberId) => ({ memberId, info: { tasks: [] } })),
    six,
  );
  assert.deepEqual(
    ['a', 'b', 'c'].map((m) => p3.get(m)!.length),
    [2, 2, 2],
  );
});

test('topology should warn about stateful operators and repartitions whose names are generated, and only those', () => {
  const unnamed = new App({ id: 'shop' });
  const keyed = unnamed
    .stream('orders', { value: json<{ user: string; amount: number }>() })
    .keyBy((o) => o.user);
  keyed.count().to('counts');
  keyed.window(tumbling(60_000)).count().to('per-minute');
  keyed.map((o) => o.amount).to('amounts');
  const w = unnamed.topology().warnings;
  assert.equal(w.length, 3, w.join('\n'));
  assert.ok(w.some((x) => /^repartition topic shop-keyby-\d+-repartition has a generated name/.test(x)));
  assert.ok(w.some((x) => /^operator count-\d+ has a generated name: its stores \(count-\d+-/.test(x)));
  assert.ok(w.some((x) => /^operator window-count-\d+ has a generated name/.test(x)));

  // Adding an operator upstream shifts a generated name: that is what the warning is about.
  const before = unnamed.topology().stores.map((s) => s.name);
  const shifted = new App({ id: 'shop' });
  shifted
    .stream('orders', { value: json<{ user: string; amount: number }>() })
    .filter(() => true)
    .keyBy((o) => o.user)
    .count()
    .to('counts');
  assert.notDeepEqual(shifted.topology().stores.map((s) => s.name)[0], before[0]);

  const named = new App({ id: 'shop' });
  named
    .stream('orders', { value: json<{ user: string; amount: number }>() })
    .filter((o) => o.amount > 0)
    .keyBy((o) => o.user, { name: 'by-user' })
    .count({ name: 'orders-per-user' })
    .to('counts');
  assert.deepEqual(named.topology().warnings, [], 'named stateful operators and repartitions: no warning');
});
