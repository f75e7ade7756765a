import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { App, json, string, valueState } from '../../../src/index.js';
import { TestDriver } from '../../../src/testing/index.js';

/**
 * Async operators through the test driver (a real Task, its async stages, the simulated Kafka):
 * order per key and per partition, the concurrency bound, retries and timeouts through the error
 * policy, an async process's state in its key's turn, and the error of a synchronous operator
 * that returns a Promise. Exactly-once across SIGKILLs with records in flight is proved against a
 * real broker in test/integration/async.test.ts.
 */

const rand = (seed: number) => () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed / 0x7fffffff;
};

test("mapAsync with ordered 'key' should keep each key's order while keys overlap, within concurrency", async () => {
  const r = rand(7);
  let active = 0;
  let maxActive = 0;
  const perKeyActive = new Map<string, number>();
  let keyOverlap = false;
  const app = new App({ id: 'drv-async-key' });
  app
    .stream('in', { key: string(), value: json<number>() })
    .mapAsync(
      async (v, ctx) => {
        active++;
        maxActive = Math.max(maxActive, active);
        const k = ctx.key as string;
        if ((perKeyActive.get(k) ?? 0) > 0) keyOverlap = true;
        perKeyActive.set(k, (perKeyActive.get(k) ?? 0) + 1);
        await sleep(Math.floor(r() * 8));
        perKeyActive.set(k, perKeyActive.get(k)! - 1);
        active--;
        return { v, k, offset: ctx.offset };
      },
      { name: 'enrich', concurrency: 4 },
    )
    .to('out', { value: json() });
  const driver = new TestDriver(app, { partitions: 2 });
  try {
    const input = driver.input('in');
    const records = Array.from({ length: 200 }, (_, i) => ({ key: `k${i % 7}`, value: i }));
    await input.pipeAll(records);
    const out = driver.output<string, { v: number; k: string }>('out').readAll();
    assert.equal(out.length, 200, 'every record once');
    for (let k = 0; k < 7; k++) {
      const got = out.filter((o) => o.key === `k${k}`).map((o) => o.value.v);
      const want = records.filter((x) => x.key === `k${k}`).map((x) => x.value);
      assert.deepEqual(got, want, `k${k}: in input order`);
    }
    assert.ok(maxActive <= 4 * 2, `at most concurrency per task (2 tasks): ${maxActive}`);
    assert.ok(maxActive > 2, `records of a task overlap: ${maxActive}`);
    assert.equal(keyOverlap, false, 'two records of one key never run at once');
  } finally {
    await driver.close();
  }
});

test("ordered 'partition' should emit in input order; 'none' as they complete", async () => {
  for (const ordered of ['partition', 'none'] as const) {
    const app = new App({ id: `drv-async-${ordered}` });
    app
      .stream('in', { key: string(), value: json<number>() })
      // Later records finish first: 'partition' must hold them back.
      .mapAsync(
        async (v) => {
          await sleep(20 - (v % 10) * 2);
          return v;
        },
        { name: 'slowfirst', concurrency: 10, ordered },
      )
      .to('out', { value: json() });
    const driver = new TestDriver(app, { partitions: 1 });
    try {
      await driver.input('in').pipeAll(Array.from({ length: 10 }, (_, i) => ({ key: `k${i}`, value: i })));
      const got = driver.output<string, number>('out').readValues();
      const inOrder = Array.from({ length: 10 }, (_, i) => i);
      if (ordered === 'partition') assert.deepEqual(got, inOrder);
      else {
        assert.deepEqual(
          [...got].sort((a, b) => a - b),
          inOrder,
          'each once',
        );
        assert.notDeepEqual(got, inOrder, 'faster later records overtake');
      }
    } finally {
      await driver.close();
    }
  }
});

test('filterAsync and flatMapAsync should keep and expand like their sync forms', async () => {
  const app = new App({ id: 'drv-async-filter' });
  app
    .stream('in', { key: string(), value: json<number>() })
    .filterAsync(async (v) => v % 2 === 0, { name: 'evens' })
    .flatMapAsync(async (v) => [v, v * 10], { name: 'twice', ordered: 'partition' })
    .to('out', { value: json() });
  const driver = new TestDriver(app, { partitions: 1 });
  try {
    await driver.input('in').pipeAll([1, 2, 3, 4].map((v) => ({ key: 'a', value: v })));
    assert.deepEqual(driver.output('out').readValues(), [2, 20, 4, 40]);
  } finally {
    await driver.close();
  }
});

test('retries should hide transient failures; exhausted retries and timeouts go to the DLQ, other keys flow', async () => {
  const failures = new Map<number, number>();
  const app = new App({ id: 'drv-async-retry' });
  app
    .stream('in', { key: string(), value: json<number>() })
    .mapAsync(
      async (v, ctx) => {
        if (ctx.key === 'hang') {
          // Never settles by itself: the timeout aborts the signal.
          await new Promise((_, reject) =>
            ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)),
          );
        }
        const n = failures.get(v) ?? 0;
        // v % 3 === 0 fails twice (retried into success); v === 5 always fails.
        if ((v % 3 === 0 && n < 2) || v === 5) {
          failures.set(v, n + 1);
          throw new Error(`HTTP 500 for ${v}`);
        }
        return v;
      },
      { name: 'call', retries: 2, backoffMs: 1, timeoutMs: 50 },
    )
    .to('out', { value: json() });
  const driver = new TestDriver(app, { partitions: 1 });
  try {
    const input = driver.input('in');
    await input.pipeAll([
      ...[1, 2, 3, 4, 5, 6].map((v) => ({ key: `k${v}`, value: v })),
      { key: 'hang', value: 100 },
      { key: 'k7', value: 7 },
    ]);
    assert.deepEqual(
      [...driver.output<string, number>('out').readValues()].sort((a, b) => a - b),
      [1, 2, 3, 4, 6, 7],
    );
    assert.equal(failures.get(3), 2, 'failed twice, then succeeded');
    assert.equal(failures.get(5), 3, 'the first attempt and two retries');
    const dl = driver.deadLetters().map((d) => [d.key?.toString(), d.error.operator, d.error.class]);
    assert.deepEqual(dl.sort(), [
      ['hang', 'call', 'AsyncTimeoutError'],
      ['k5', 'call', 'Error'],
    ]);
  } finally {
    await driver.close();
  }
});

test("an async process should read and write its key's state in the key's turn", async () => {
  const app = new App({ id: 'drv-async-process' });
  const state = { sum: valueState<number>() };
  app
    .keyedStream('in', { key: string(), value: json<number>() })
    .process<number, typeof state>(
      {
        state,
        async onRecord(v, ctx) {
          const before = ctx.state.sum.get() ?? 0;
          await sleep(v % 5);
          ctx.state.sum.set(before + v);
          ctx.emit(before + v);
        },
      },
      { name: 'asum', concurrency: 8 },
    )
    .to('out', { value: json() });
  const driver = new TestDriver(app, { partitions: 2 });
  try {
    const records = Array.from({ length: 120 }, (_, i) => ({ key: `k${i % 5}`, value: i }));
    await driver.input('in').pipeAll(records);
    const out = driver.output<string, number>('out').readAll();
    for (let k = 0; k < 5; k++) {
      let sum = 0;
      const want = records.filter((r) => r.key === `k${k}`).map((r) => (sum += r.value));
      assert.deepEqual(
        out.filter((o) => o.key === `k${k}`).map((o) => o.value),
        want,
        `k${k}: running sums in order`,
      );
    }
    assert.equal(await driver.state<string, number>('asum-sum').get('k0'), want0(records));
  } finally {
    await driver.close();
  }
});

function want0(records: Array<{ key: string; value: number }>): number {
  return records.filter((r) => r.key === 'k0').reduce((a, r) => a + r.value, 0);
}

test('a sync map that returns a Promise should fail the job at the first record, naming mapAsync', async () => {
  const app = new App({ id: 'drv-async-misuse' });
  app
    .stream('in', { key: string(), value: json<number>() })
    .map(async (v) => v + 1, { name: 'oops' })
    .to('out', { value: json() });
  const driver = new TestDriver(app, { partitions: 1 });
  try {
    await assert.rejects(driver.input('in').pipe('a', 1), (e: Error) => {
      const msg = `${e.message} ${(e.cause as Error | undefined)?.message ?? ''}`;
      assert.match(msg, /oops/);
      assert.match(msg, /mapAsync/);
      return true;
    });
    assert.deepEqual(driver.output('out').readValues(), [], 'nothing serialized as {}');
    assert.equal(driver.deadLetters().length, 0, 'not a dead letter: the job is wrong');
  } finally {
    await driver.close();
  }
});

test('bad async options and an async process with map state or timers should fail when the job is built', () => {
  const app = new App({ id: 'drv-async-bad' });
  const s = app.stream('in', { key: string(), value: json<number>() });
  assert.throws(
    () => s.mapAsync(async (v) => v, { name: 'bad', concurrency: 0, ordered: 'x' as never, timeoutMs: -1 }),
    /concurrency must be an integer >= 1.*timeoutMs.*ordered must be one of/,
  );
  assert.throws(
    () =>
      s.byKey().process(
        {
          async onRecord() {},
          onTimer() {},
        },
        { name: 'bad2' },
      ),
    /cannot have timers/,
  );
});
