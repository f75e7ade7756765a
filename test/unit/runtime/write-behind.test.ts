import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RocksTaskState } from '../../../src/runtime/rocks-task-state.js';
import { FLUSH_BATCH_OPS, flushedMeta, WriteBehind } from '../../../src/runtime/write-behind.js';
import { type CheckpointMeta, decodeCheckpointMeta } from '../../../src/state/checkpoint-meta.js';
import type { WriteOp } from '../../../src/state/rocks-store.js';
import { sumApp } from '../../helpers/sum-app.js';
import { taskHarness } from '../../helpers/task-harness.js';

const turn = () => new Promise<void>((r) => setImmediate(r));
const put = (store: string, key: string, value: string | null): WriteOp => ({
  store,
  key: Buffer.from(key),
  value: value === null ? null : Buffer.from(value),
});
const read = (w: WriteBehind, store: string, key: string) => {
  const v = w.get(store, Buffer.from(key));
  return v === undefined || v === null ? v : v.toString();
};

/** A flush in steps of `n` keys of store `s`, its batches recorded, each written on its own turn. */
function flushing(n: number, batchOps: number) {
  const w = new WriteBehind(n, () => Number.MAX_SAFE_INTEGER);
  w.add(Array.from({ length: n }, (_, i) => put('s', `k${i}`, `v${i}`)));
  const batches: Array<{ ops: string[]; last: boolean }> = [];
  w.flush(batchOps, {
    write: (ops) => {
      batches.push({ ops: ops.keys.map((k, i) => `${k}=${ops.values[i]}`), last: false });
      return Promise.resolve();
    },
    done: () => {
      batches.at(-1)!.last = true;
    },
  });
  return { w, batches };
}

test('a flush in steps should write one batch per turn, the meta with the last only', async () => {
  const { w, batches } = flushing(10, 4);
  assert.equal(batches.length, 0, 'nothing is written before the next turn');
  assert.equal(w.flushing, true);
  await turn();
  assert.equal(batches.length, 1, 'one batch per turn');
  for (let i = 0; i < 5 && w.flushing; i++) await turn();
  assert.deepEqual(
    batches.map((b) => [b.ops.length, b.last]),
    [
      [4, false],
      [4, false],
      [2, true],
    ],
  );
  assert.deepEqual(
    batches.flatMap((b) => b.ops),
    Array.from({ length: 10 }, (_, i) => `k${i}=v${i}`),
  );
  assert.equal(w.flushing, false);
  assert.equal(w.size, 0, 'forgotten once RocksDB has all of it');
});

test('a flush in steps should answer reads until its last batch, under the writes that came after it', async () => {
  const { w } = flushing(10, 4);
  await turn(); // the first batch is in RocksDB, the rest not yet
  w.add([put('s', 'k1', 'newer'), put('s', 'k9', null)]);
  assert.equal(read(w, 's', 'k1'), 'newer', 'a later write wins');
  assert.equal(read(w, 's', 'k9'), null, 'a later delete wins');
  assert.equal(read(w, 's', 'k5'), 'v5', 'a key being flushed still answers');
  assert.equal(read(w, 's', 'nope'), undefined);
  // A clean close writes everything at once: the flushed keys, under the later writes.
  const all = new Map(w.all().map((o) => [o.key.toString(), o.value?.toString() ?? null]));
  assert.equal(all.size, 10);
  assert.equal(all.get('k1'), 'newer');
  assert.equal(all.get('k9'), null);
  assert.equal(all.get('k5'), 'v5');
  while (w.flushing) await turn();
  assert.equal(read(w, 's', 'k5'), undefined, 'flushed: RocksDB answers');
  assert.equal(read(w, 's', 'k1'), 'newer', 'the later write still waits');
  assert.equal(w.size, 2);
});

test('a flush in steps should stop when cleared, and keep its writes waiting when a batch fails', async () => {
  const { w, batches } = flushing(10, 4);
  await turn();
  w.clear();
  await turn();
  await turn();
  assert.equal(batches.length, 1, 'a cleared flush writes nothing more');

  const f = new WriteBehind(10, () => Number.MAX_SAFE_INTEGER);
  f.add(Array.from({ length: 10 }, (_, i) => put('s', `k${i}`, `v${i}`)));
  let n = 0;
  f.flush(4, {
    write: () => (++n === 2 ? Promise.reject(new Error('disk full')) : Promise.resolve()),
    done: () => assert.fail('a failed flush is not done'),
  });
  f.add([put('s', 'k7', 'newer')]);
  for (let i = 0; i < 4; i++) await turn();
  assert.equal((f.failed as Error).message, 'disk full');
  assert.equal(f.flushing, false);
  assert.equal(read(f, 's', 'k7'), 'newer', 'the later write still wins');
  assert.equal(read(f, 's', 'k8'), 'v8', 'what was not written still waits');
  assert.equal(f.all().length, 10);
});

const fp = (offset: string) => ({ offset, timestamp: '1', hash: offset.padStart(32, '0') });

test("a flush's meta entry should take the waiting stores' offsets of the checkpoint that began it, and the newest fingerprints", () => {
  const stored: CheckpointMeta = {
    version: 1,
    changelogOffsets: { sums: '10', seen: '40' },
    changelogLast: { sums: fp('12'), seen: fp('39') },
    writtenAt: 5,
  };
  const to: CheckpointMeta = {
    version: 1,
    changelogOffsets: { sums: '30', seen: '35' },
    changelogLast: { sums: fp('29'), seen: fp('34') },
    writtenAt: 3,
  };
  assert.deepEqual(flushedMeta(stored, to, new Set(['sums'])), {
    version: 1,
    changelogOffsets: { sums: '30', seen: '40' },
    changelogLast: { sums: fp('12'), seen: fp('39') },
    writtenAt: 5,
  });
});

test('a task whose checkpoint leaves more keys waiting than one batch should flush them over several turns, reading right throughout', async () => {
  const h = await taskHarness(
    sumApp('unit-wb-steps', 's'),
    { state: { localCheckpointRecords: 100 } },
    { written: true },
  );
  const st = h.task.stateStore as RocksTaskState;
  const offset = () => decodeCheckpointMeta(st.rocks.readMeta()!).changelogOffsets['s-acc'];
  const keys = Array.from({ length: 2 * FLUSH_BATCH_OPS + 100 }, (_, i) => `k${i}`);
  h.task.process(
    'in',
    keys.map((k) => h.rec(k, { n: 1 }, 1)),
    () => undefined,
  );
  const writes = st.rocks.writes;
  await h.checkpoint();
  const stored = () => keys.filter((k) => st.rocks.getSync('s-acc', Buffer.from(k)) !== undefined).length;
  assert.ok(stored() < keys.length, 'RocksDB does not take them all in the checkpoint');
  // With the cache emptied, every key reads its committed value.
  st.resizeCache(0);
  st.resizeCache(1 << 20);
  h.task.process(
    'in',
    keys.map((k) => h.rec(k, { n: 10 }, 2)),
    () => undefined,
  );
  const out = await h.checkpoint();
  assert.deepEqual(
    new Set(h.values(out, 'out').map((v) => v.sum)),
    new Set([11]),
    'each sum continues from 1',
  );
  // Until RocksDB has every key the meta entry keeps the offset before the flush, as a crash
  // would find it: a restart replays the changelog from there.
  for (let i = 0; i < 400 && offset() === '0'; i++) {
    assert.ok(offset() === '0' || stored() === keys.length, 'the meta entry moves after the keys');
    await new Promise((r) => setTimeout(r, 5));
  }
  assert.equal(stored(), keys.length, 'RocksDB took them all in the end');
  assert.equal(
    offset(),
    String(keys.length),
    'the last batch moved the offset to the checkpoint that began the flush',
  );
  assert.ok(st.rocks.writes - writes >= 3, `in batches (${st.rocks.writes - writes} writes)`);
});
