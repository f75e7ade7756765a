import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, json, mapState, string, valueState } from '../../../src/index.js';
import { keyedStoresOf, readAheadBatch } from '../../../src/runtime/read-ahead.js';
import type { RocksTaskState } from '../../../src/runtime/rocks-task-state.js';
import { taskHarness } from '../../helpers/task-harness.js';

/**
 * Issue 14: a keyed operator's keys are read from RocksDB for a whole fetched batch at once
 * (a MultiGet), the first slice's on the processing thread and the rest's on the libuv pool,
 * instead of one synchronous read per record that misses the cache.
 */
function sums(id: string) {
  const a = new App({ id });
  a.keyedStream('in', { key: string(), value: json<{ n: number }>() })
    .filter((v) => v.n >= 0)
    .process(
      {
        state: { acc: valueState<number>(), seen: mapState<string, number>() },
        onRecord(v, ctx) {
          const sum = (ctx.state.acc.get() ?? 0) + v.n;
          ctx.state.acc.set(sum);
          ctx.emit({ sum });
        },
      },
      { name: 's' },
    )
    .to('out');
  return a;
}

test('the stores read ahead should be the value stores of process operators keyed by the source key', () => {
  const a = sums('unit-ra-stores');
  const sub = a.topology().subtopologies[0]!;
  assert.deepEqual(keyedStoresOf(sub, 'in'), ['s-acc'], 'value store only (not the map store)');

  // A new key: the operator after it reads another key than the record's, in another sub-topology.
  const b = new App({ id: 'unit-ra-rekeyed' });
  b.stream('in', { key: string(), value: json<{ u: string }>() })
    .keyBy((v) => v.u)
    .count({ name: 'c' })
    .to('out');
  const [first, second] = b.topology().subtopologies;
  assert.deepEqual(keyedStoresOf(first!, 'in'), [], 'nothing keyed by the source key before the repartition');
  const repartition = second!.sourceTopics[0]!;
  assert.equal(keyedStoresOf(second!, repartition).length, 1, 'the count reads the repartitioned key');
});

test('a batch read ahead should leave the values the records would have read, and cost one MultiGet for the first slice', async () => {
  const h = await taskHarness(sums('unit-ra-values'));
  const st = h.task.stateStore as RocksTaskState;
  const keys = Array.from({ length: 50 }, (_, i) => `k${i}`);
  h.task.process(
    'in',
    keys.map((k, i) => h.rec(k, { n: i }, 1)),
    () => undefined,
  );
  await h.checkpoint();
  st.resizeCache(0); // every clean entry goes: the next reads go to RocksDB
  assert.equal(st.cache.entries, 0);

  let multiGets = 0;
  const getManySync = st.rocks.getManySync.bind(st.rocks);
  st.rocks.getManySync = (store, ks) => {
    multiGets++;
    return getManySync(store, ks);
  };
  st.resizeCache(1 << 20);
  const batch = keys.map((k) => h.rec(k, { n: 1000 }, 2));
  const missesBefore = st.cache.misses;
  readAheadBatch(h.task, 'in', batch, batch.length);
  assert.equal(multiGets, 1, 'one MultiGet for the whole slice');
  assert.equal(st.cache.misses - missesBefore, 50, 'each key loaded once, counted as a miss');
  h.task.process('in', batch, () => undefined);
  assert.equal(st.cache.misses - missesBefore, 50, 'the records found their keys in the cache');
  const out = await h.checkpoint();
  assert.deepEqual(
    h.values(out, 'out').map((v) => v.sum),
    keys.map((_, i) => i + 1000),
    'each sum continues from the stored one',
  );
});

/**
 * `localCheckpointRecords` 0: each checkpoint writes RocksDB, so the pool's answer is dropped; by
 * default the checkpoint's write waits in memory (write-behind.ts), which answers over RocksDB.
 */
async function staleAnswer(localCheckpointRecords: number) {
  const h = await taskHarness(sums(`unit-ra-stale-${localCheckpointRecords}`), {
    state: { localCheckpointRecords },
  });
  const st = h.task.stateStore as RocksTaskState;
  h.task.process('in', [h.rec('a', { n: 1 }, 1)], () => undefined);
  await h.checkpoint();
  st.resizeCache(0);
  st.resizeCache(1 << 20);

  // The pool reads now (a = 1) and answers only when released, as a slow MultiGet would.
  let release: () => void = () => undefined;
  st.rocks.getManyAsync = async (store, keys) => {
    const values = st.rocks.getManySync(store, keys);
    await new Promise<void>((r) => {
      release = r;
    });
    return values;
  };
  const batch = [h.rec('b', { n: 5 }, 2), h.rec('a', { n: 10 }, 2)];
  readAheadBatch(h.task, 'in', batch, 1); // 'b' now, 'a' on the pool
  // Meanwhile 'a' is read, written, checkpointed (a = 11 in RocksDB) and evicted.
  h.task.process('in', [h.rec('a', { n: 10 }, 2)], () => undefined);
  await h.checkpoint();
  st.resizeCache(0);
  st.resizeCache(1 << 20);
  release();
  await new Promise((r) => setImmediate(r));
  if (localCheckpointRecords === 0)
    assert.equal(st.cache.has('s-acc', Buffer.from('a')), false, 'the stale answer (a = 1) was dropped');
  else
    assert.notEqual(
      st.cache.peek('s-acc', Buffer.from('a'))?.value,
      1,
      'the stale answer (a = 1) was not taken',
    );
  h.task.process('in', [h.rec('a', { n: 100 }, 3)], () => undefined);
  const out = await h.checkpoint();
  assert.deepEqual(
    h.values(out, 'out').map((v) => v.sum),
    [111],
    'the sum continues from the checkpointed 11, not the stale 1',
  );
}

test('an answer read on the pool before a checkpoint wrote should not be taken after it', () =>
  staleAnswer(0));
test('an answer read on the pool should not be taken over a committed write that waits for RocksDB', () =>
  staleAnswer(10_000));

test('a cache that answers nearly every read should not be read ahead', async () => {
  const h = await taskHarness(sums('unit-ra-hot'));
  const st = h.task.stateStore as RocksTaskState;
  const hot = Array.from({ length: 400 }, (_, i) => h.rec(`k${i % 4}`, { n: 1 }, 1));
  h.task.process('in', hot, () => undefined); // 4 misses, 396 hits
  let multiGets = 0;
  st.rocks.getManySync = () => {
    multiGets++;
    return [];
  };
  st.rocks.getManyAsync = async () => {
    multiGets++;
    return [];
  };
  // A batch larger than its first slice: neither the slice's MultiGet nor the pool's for the rest.
  readAheadBatch(h.task, 'in', [h.rec('new', { n: 1 }, 1), h.rec('other', { n: 1 }, 1)], 1);
  assert.equal(multiGets, 0, 'skipped: 1 read in 100 missed');
});
