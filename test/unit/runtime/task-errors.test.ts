import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ValueStateDescriptor } from '../../../src/api/state.js';
import { App, json, type Serde, string, tumbling, valueState } from '../../../src/index.js';
import type { RocksTaskState } from '../../../src/runtime/rocks-task-state.js';
import { StateIoError } from '../../../src/state/errors.js';
import { taskHarness } from '../../helpers/task-harness.js';

/**
 * What a task does when user code fails: the outputs the failing record or timer emitted are
 * taken back, and nothing else (issue 13, items 1 and 3).
 */

test('a record whose operator throws should keep the window results its watermark advance fired (issue 13.1)', async () => {
  const app = new App({ id: 'unit-win-throw' });
  app
    .stream('in', { key: string(), value: json<{ boom?: boolean }>() })
    .peek((v) => {
      if (v.boom) throw new Error('boom');
    })
    .byKey()
    .window(tumbling(10), { grace: 0 })
    .count()
    .to('out');
  const h = await taskHarness(app);
  // Two records in [0, 10); the third, at 25, closes that window and then fails in peek.
  h.task.process(
    'in',
    [h.rec('a', {}, 1), h.rec('a', {}, 2), h.rec('a', { boom: true }, 25)],
    () => undefined,
  );
  const out = await h.checkpoint();
  assert.deepEqual(h.values(out, 'out'), [{ start: 0, end: 10, value: 2 }], 'the closed window is emitted');
  assert.equal(out.get('unit-win-throw-dlq')?.length, 1, 'the failing record is dead-lettered');
  await h.task.close({ checkpoint: false });
});

/** A processor that sets a timer 10 ms after each record; its onTimer emits, then throws for `bad`. */
function timerApp(id: string, seen: Array<{ topic: string; offset: string; headers: unknown }> = []) {
  const app = new App({ id });
  app
    .stream('in', { key: string(), value: json<unknown>() })
    .byKey()
    .process<string>(
      {
        onRecord(_v, ctx) {
          ctx.timers.atEventTime(ctx.timestamp + 10);
        },
        onTimer(ts, ctx) {
          // Not in TimerContext's type; the runtime's context has them (they must be empty here).
          const c = ctx as unknown as { topic: string; offset: string; headers: unknown };
          seen.push({ topic: c.topic, offset: c.offset, headers: c.headers });
          ctx.emit(`${ctx.key}@${ts}`);
          if (ctx.key === 'bad') throw new Error('timer boom');
        },
      },
      { name: 'tp' },
    )
    .to('out');
  return app;
}

test('a throwing onTimer should be dead-lettered, its partial outputs taken back, and the other due timers fire with a clean context (issue 13.3)', async () => {
  const seen: Array<{ topic: string; offset: string; headers: unknown }> = [];
  const h = await taskHarness(timerApp('unit-timer-dlq', seen));
  h.task.process(
    'in',
    [h.rec('bad', {}, 1), h.rec('good', {}, 2), h.rec('x', {}, 20, { trace: 'of-x' })],
    () => undefined,
  );
  const out = await h.checkpoint();
  assert.deepEqual(
    h.values(out, 'out'),
    ['good@12'],
    "the bad timer's output is taken back, the good one fires",
  );
  assert.equal(
    out.get('out')![0]!.headers,
    undefined,
    'timer outputs carry no headers of the record that came last',
  );
  assert.deepEqual(
    seen.map((s) => [s.topic, s.offset, s.headers]),
    [
      ['', '', undefined],
      ['', '', undefined],
    ],
    'onTimer sees no topic, offset or headers of an unrelated record',
  );
  const dlq = out.get('unit-timer-dlq-dlq') ?? [];
  assert.equal(dlq.length, 1);
  assert.equal(dlq[0]!.key?.toString(), 'bad');
  assert.equal(dlq[0]!.value, null);
  assert.equal(dlq[0]!.timestamp, '11');
  const hd = dlq[0]!.headers as Record<string, string>;
  assert.equal(hd['sluice.error.kind'], 'timer');
  assert.equal(hd['sluice.error.operator'], 'tp');
  assert.equal(hd['sluice.error.message'], 'timer boom');
  assert.equal(hd['sluice.timer.timestamp'], '11');
  assert.equal(hd['sluice.timer.domain'], 'event');
  const timerErrors = (await h.metrics.errors.get()).values.find((v) => v.labels.kind === 'timer')?.value;
  assert.equal(timerErrors, 1);
  await h.task.close({ checkpoint: false });
});

test('a throwing onTimer under the fail policy should fail the batch; under skip it leaves no dead letter (issue 13.3)', async () => {
  const f = await taskHarness(timerApp('unit-timer-fail'), { processing: { errorPolicy: 'fail' } });
  assert.throws(
    () => f.task.process('in', [f.rec('bad', {}, 1), f.rec('x', {}, 20)], () => undefined),
    (e: any) => e.code === 'SLUICE_OPERATOR' && /timer of operator tp at 11/.test(e.message),
  );
  await f.task.close({ checkpoint: false });

  const s = await taskHarness(timerApp('unit-timer-skip'), { processing: { errorPolicy: 'skip' } });
  s.task.process('in', [s.rec('bad', {}, 1), s.rec('good', {}, 2), s.rec('x', {}, 20)], () => undefined);
  const out = await s.checkpoint();
  assert.deepEqual(s.values(out, 'out'), ['good@12']);
  assert.equal(out.get('unit-timer-skip-dlq'), undefined);
  await s.task.close({ checkpoint: false });
});

test('a state read that fails (StateIoError) should fail the batch, not become a dead letter (issue 13.2)', async () => {
  const app = new App({ id: 'unit-state-io' });
  app
    .stream('in', { key: string(), value: json<unknown>() })
    .byKey()
    .process(
      {
        state: { n: valueState<number>() },
        onRecord(_v, ctx) {
          const n = (ctx.state.n.get() ?? 0) + 1;
          ctx.state.n.set(n);
          ctx.emit(n);
        },
      },
      { name: 'counter' },
    )
    .to('out');
  const h = await taskHarness(app);
  h.task.process('in', [h.rec('a', {}, 1)], () => undefined);
  const rocks = (h.task.stateStore as RocksTaskState).rocks;
  rocks.getSync = () => {
    throw new StateIoError('/state', 'read', 'state I/O error during read: EIO');
  };
  assert.throws(
    () => h.task.process('in', [h.rec('b', {}, 2)], () => undefined),
    (e: unknown) => e instanceof StateIoError,
    'the StateIoError reaches the worker unwrapped (not an OperatorError)',
  );
  const out = await h.checkpoint();
  assert.equal(out.get('unit-state-io-dlq'), undefined, 'no dead letter for a good record');
  await h.task.close({ checkpoint: false });
});

test('a state value JSON cannot write should dead-letter the record that set it, and the checkpoint should commit the others', async () => {
  const state = { last: valueState<{ n: unknown }>() };
  const app = new App({ id: 'unit-bigint-state' });
  app
    .stream('in', { key: string(), value: json<{ big?: boolean; n: number }>() })
    .byKey()
    .process<number, typeof state>(
      {
        state,
        onRecord(v, ctx) {
          ctx.state.last.set({ n: v.big ? BigInt(v.n) : v.n });
          ctx.emit(v.n);
        },
      },
      { name: 'keep' },
    )
    .to('out');
  const h = await taskHarness(app);
  h.task.process(
    'in',
    [h.rec('a', { n: 1 }, 1), h.rec('b', { n: 2, big: true }, 2), h.rec('c', { n: 3 }, 3)],
    () => undefined,
  );
  const out = await h.checkpoint();
  assert.deepEqual(h.values(out, 'out'), [1, 3], 'the others are out');
  const dlq = out.get('unit-bigint-state-dlq') ?? [];
  assert.equal(dlq.length, 1, 'the record that set the bigint is dead-lettered');
  assert.match(String(dlq[0]!.headers?.['sluice.error.message']), /bigint \(2\) has no JSON form/);
  await h.task.close({ checkpoint: false });
});

/** A job whose `keep` operator sets its one value state `name` to `toState(n)` for each `{ n }`, and emits n. */
function keepApp<T>(
  id: string,
  name: string,
  descriptor: ValueStateDescriptor<T>,
  toState: (n: number) => T,
) {
  const state = { [name]: descriptor };
  const app = new App({ id });
  app
    .stream('in', { key: string(), value: json<{ n: number }>() })
    .byKey()
    .process<number, typeof state>(
      {
        state,
        onRecord(v, ctx) {
          ctx.state[name]!.set(toState(v.n));
          ctx.emit(v.n);
        },
      },
      { name: 'keep' },
    )
    .to('out');
  return app;
}

test('a state value its custom serde cannot write should fail the worker with the store named, not fail every checkpoint', async () => {
  // A custom serde writes at the checkpoint, where no record is left to dead-letter.
  const picky: Serde<number> = {
    name: 'picky',
    serialize: (v) => {
      if (v === 13) throw new RangeError('13 is unlucky');
      return Buffer.from(String(v));
    },
    deserialize: (b) => Number(b?.toString()),
  };
  const app = keepApp('unit-picky-state', 'last', valueState<number>(picky), (n) => n);
  const h = await taskHarness(app);
  h.task.process('in', [h.rec('a', { n: 13 }, 1)], () => undefined);
  await assert.rejects(h.task.checkpoint(), (e: unknown) => {
    assert.equal(
      (e as { code?: string }).code,
      'SLUICE_OPERATOR',
      'the worker fails (as under the fail policy)',
    );
    assert.match((e as Error).message, /state store \S*last\S* .*\(picky\) cannot write: 13 is unlucky/);
    return true;
  });
  await h.task.close({ checkpoint: false });
});

test('a state too large for its changelog topic should fail the worker with the store and the bound named', async () => {
  const app = keepApp('unit-big-state', 'kept', valueState<string>(), (n) => 'x'.repeat(n));
  const changelog = app.topology().stores[0]!.changelog;
  const h = await taskHarness(app, {}, { recordLimits: new Map([[changelog, 2000]]) });
  h.task.process('in', [h.rec('a', { n: 1000 }, 1)], () => undefined);
  const out = await h.checkpoint();
  assert.equal(out.get(changelog)?.length, 1, 'a state under the bound is written');
  h.task.process('in', [h.rec('a', { n: 3000 }, 2)], () => undefined);
  await assert.rejects(h.task.checkpoint(), (e: unknown) => {
    assert.equal((e as { code?: string }).code, 'SLUICE_OPERATOR');
    assert.match(
      (e as Error).message,
      new RegExp(
        `state store keep-kept: a state of 300\\d bytes .* over the 2000 bytes its changelog ${changelog} takes`,
      ),
    );
    return true;
  });
  await h.task.close({ checkpoint: false });
});
