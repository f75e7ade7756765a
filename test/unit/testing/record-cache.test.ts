import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, json, string, tumbling } from '../../../src/index.js';
import { TestDriver } from '../../../src/testing/index.js';

/**
 * The record cache (Kafka Streams' `statestore.cache.max.bytes`): aggregations send the newest
 * update per key (and window) at each checkpoint instead of every update; `cache: false` and a
 * bound of 0 send every update; past the bound the oldest updates go at the end of a batch; an
 * update that fails downstream at the flush follows the error policy; a crash loses nothing.
 */
function counts(id: string, opts: { cache?: boolean; throwAt?: number } = {}): App {
  const app = new App({ id });
  app
    .keyedStream('in', { key: string(), value: json<number>() })
    .count({ name: 'n', ...(opts.cache === undefined ? {} : { cache: opts.cache }) })
    .map((n) => {
      if (n === opts.throwAt) throw new Error(`no ${n}`);
      return n;
    })
    .to('out', { value: json<number>() });
  return app;
}

const pairs = (d: TestDriver) =>
  d
    .output<string, number>('out')
    .readAll()
    .map((r) => [r.key, r.value] as [string | null, number]);

async function pipeKeys(d: TestDriver, keys: string[]): Promise<void> {
  await d.input('in').pipeAll(keys.map((k, i) => ({ key: k, value: i })));
}

test('a cached count should send one update per key per checkpoint: the newest', async () => {
  const d = new TestDriver(counts('rc-on'), { commit: 'manual' });
  try {
    await pipeKeys(d, ['a', 'a', 'b', 'a', 'b', 'a']);
    await d.commit();
    assert.deepEqual(pairs(d).sort(), [
      ['a', 4],
      ['b', 2],
    ]);
    await pipeKeys(d, ['b', 'b', 'c']);
    await d.commit();
    assert.deepEqual(pairs(d).sort(), [
      ['b', 4],
      ['c', 1],
    ]);
    // The changelog took one record per key per checkpoint too (the write-back cache's doing).
    assert.equal(d.state('n-agg').get('a'), 4);
  } finally {
    await d.close();
  }
});

test('cache: false and a bound of 0 should send every update', async () => {
  for (const [name, app, config] of [
    ['operator', counts('rc-off', { cache: false }), {}],
    ['bound 0', counts('rc-zero'), { state: { recordCacheMaxBytes: 0 } }],
  ] as const) {
    const d = new TestDriver(app, { commit: 'manual', config });
    try {
      await pipeKeys(d, ['a', 'a', 'b', 'a']);
      await d.commit();
      assert.deepEqual(
        pairs(d),
        [
          ['a', 1],
          ['a', 2],
          ['b', 1],
          ['a', 3],
        ],
        name,
      );
    } finally {
      await d.close();
    }
  }
});

test('past its bound the cache should send the least recently updated keys at the end of a batch, and lose none', async () => {
  // About 140 bytes an entry: a bound of 1 KiB holds a few keys of the 50.
  const d = new TestDriver(counts('rc-bound'), {
    commit: 'manual',
    config: { state: { recordCacheMaxBytes: 1024 } },
  });
  try {
    // Each batch: 10 cold keys once, then 5 hot keys 4 times each: the hot keys, updated last,
    // stay; the oldest cold keys go out at the end of each batch.
    const expected = new Map<string, number>();
    let total = 0;
    for (let b = 0; b < 5; b++) {
      const keys = Array.from({ length: 10 }, (_, i) => `cold${i}`);
      for (let r = 0; r < 4; r++) for (let h = 0; h < 5; h++) keys.push(`hot${h}`);
      for (const k of keys) expected.set(k, (expected.get(k) ?? 0) + 1);
      total += keys.length;
      await pipeKeys(d, keys);
    }
    await d.commit();
    const out = pairs(d);
    assert.deepEqual(
      Object.fromEntries(new Map(out)),
      Object.fromEntries(expected),
      'the newest update of every key',
    );
    assert.ok(out.length > expected.size, `evicted updates went out before the checkpoint (${out.length})`);
    assert.ok(out.length < total / 2, `hot keys were absorbed (${out.length} of ${total})`);
  } finally {
    await d.close();
  }
});

test('an update that fails downstream when the cache flushes should become a dead letter of kind cache', async () => {
  const d = new TestDriver(counts('rc-dlq', { throwAt: 3 }), {
    commit: 'manual',
    config: { processing: { errorPolicy: 'dlq' } },
  });
  try {
    await pipeKeys(d, ['a', 'a', 'a', 'b']);
    await d.commit();
    assert.deepEqual(pairs(d), [['b', 1]]);
    const dl = d.deadLetters();
    assert.equal(dl.length, 1);
    assert.equal(dl[0]!.headers['sluice.error.kind'], 'cache');
    assert.match(String(dl[0]!.headers['sluice.error.message']), /no 3/);
    assert.equal(dl[0]!.key?.toString(), '"a"');
  } finally {
    await d.close();
  }
});

test('a crash should lose no cached update: after the restart the counts are exact', async () => {
  const d = new TestDriver(counts('rc-crash'), { commit: 'manual', partitions: 2 });
  try {
    await pipeKeys(d, ['a', 'b', 'a']);
    await d.commit();
    await pipeKeys(d, ['a', 'b', 'c']); // held in the cache, never committed
    await d.crash();
    await d.restart();
    await d.commit(); // the re-read records, counted once
    await pipeKeys(d, ['a']);
    await d.commit();
    const last = new Map(pairs(d));
    assert.deepEqual(Object.fromEntries(last), { a: 4, b: 2, c: 1 });
  } finally {
    await d.close();
  }
});

test('a windowed aggregation emitting updates should send one per key and window per checkpoint', async () => {
  const app = new App({ id: 'rc-window' });
  app
    .keyedStream('in', { key: string(), value: json<number>() })
    .window(tumbling(1000), { emit: 'update', grace: 5000 })
    .count({ name: 'w' })
    .map((w) => `${w.start}:${w.value}`)
    .to('out', { value: json<string>() });
  const d = new TestDriver(app, { commit: 'manual' });
  try {
    const input = d.input('in');
    for (const ts of [100, 200, 1100, 300, 1200, 1300]) await input.pipe('a', ts, { timestamp: ts });
    await d.commit();
    assert.deepEqual(
      d
        .output<string, string>('out')
        .readAll()
        .map((r) => r.value)
        .sort(),
      ['0:3', '1000:3'],
    );
  } finally {
    await d.close();
  }
});

test('a cached count should hold the number key 1 and the string key "1" apart', async () => {
  const app = new App({ id: 'rc-key-types' });
  app
    .keyedStream('in', { key: json<string | number>(), value: json<number>() })
    .count({ name: 'n' })
    .to('out', { key: json<string | number>(), value: json<number>() });
  const d = new TestDriver(app, { commit: 'manual' });
  try {
    const input = d.input<string | number, number>('in');
    for (const k of [1, '1', 1, 'x', 1]) await input.pipe(k, 0);
    await d.commit();
    const out = d
      .output<string | number, number>('out')
      .readAll()
      .map((r) => [r.key, r.value]);
    // One update per key, the newest, in the order of their last update.
    assert.deepEqual(out, [
      ['1', 1],
      ['x', 1],
      [1, 3],
    ]);
  } finally {
    await d.close();
  }
});
