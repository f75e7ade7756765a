import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, json, listState, mapState, string, valueState } from '../../../src/index.js';
import { taskHarness } from '../../helpers/task-harness.js';

/**
 * State handles copy values in and out (issue 13.4): a value changed without set() must change
 * neither memory nor the changelog, so the state after a restore is the state before it.
 */
test('get() should return a copy: a change without set() changes neither the state in memory nor its changelog', async () => {
  const app = new App({ id: 'unit-copies' });
  type S = { n: number; tags: string[] };
  app
    .stream('in', { key: string(), value: json<{ op: string }>() })
    .byKey()
    .process(
      {
        state: { v: valueState<S>(), m: mapState<string, S>(), l: listState<S>() },
        onRecord({ op }, ctx) {
          const { v, m, l } = ctx.state;
          if (op === 'init') {
            const mine = { n: 1, tags: ['a'] };
            v.set(mine);
            m.set('x', mine);
            l.add(mine);
            // Changing what was set, after set(): not the state.
            mine.n = 1000;
            mine.tags.push('after-set');
          } else {
            // Changing what get() returned, without set(): not the state either.
            const got = v.get()!;
            got.n = 99;
            got.tags.push('no-set');
            m.get('x')!.n = 99;
            for (const [, s] of m.entries()) s.tags.push('no-set');
            (l.get() as S[])[0]!.n = 99;
          }
          ctx.emit({ v: v.get(), m: m.get('x'), l: l.get() });
        },
      },
      { name: 'p' },
    )
    .to('out');
  const h = await taskHarness(app);
  h.task.process('in', [h.rec('k', { op: 'init' }, 1), h.rec('k', { op: 'mutate' }, 2)], () => undefined);
  const out = await h.checkpoint();
  const want = { n: 1, tags: ['a'] };
  assert.deepEqual(h.values(out, 'out'), [
    { v: want, m: want, l: [want] },
    { v: want, m: want, l: [want] },
  ]);
  const changelog = h.values(out, 'unit-copies-p-v-changelog');
  assert.deepEqual(changelog, [want], 'the changelog has what memory has');
  const store = h.task.stateStore!;
  assert.deepEqual(store.read!('p-v', Buffer.from('k')), want, 'memory has what the changelog has');
  await h.task.close({ checkpoint: false });
});
