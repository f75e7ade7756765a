import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, json, listState, mapState, string } from '../../../src/index.js';
import type { RocksTaskState } from '../../../src/runtime/rocks-task-state.js';
import type { WriteOp } from '../../../src/state/rocks-store.js';
import { TestDriver } from '../../../src/testing/index.js';
import { taskHarness } from '../../helpers/task-harness.js';

/**
 * Issue 13.5: map and list state are stored one entry per map key and per list element, so that
 * touching one entry costs one changelog record and one RocksDB key, whatever the size of the map
 * or list (the blob layout re-sent the whole map or list on every touch).
 */
type Op = { op: 'fill'; n: number } | { op: 'put'; k: string } | { op: 'del'; k: string } | { op: 'clear' };

function app(id: string) {
  const a = new App({ id });
  a.stream('in', { key: string(), value: json<Op>() })
    .byKey()
    .process(
      {
        state: { m: mapState<string, number>(), l: listState<number>() },
        onRecord(r, ctx) {
          const { m, l } = ctx.state;
          if (r.op === 'fill') {
            for (let i = 0; i < r.n; i++) {
              m.set(`k${String(i).padStart(5, '0')}`, i);
              l.add(i);
            }
          } else if (r.op === 'put') {
            m.set(r.k, -1);
            l.add(-1);
          } else if (r.op === 'del') {
            m.delete(r.k);
          } else {
            m.clear();
            l.clear();
          }
          ctx.emit({ size: m.size, len: l.get().length });
        },
      },
      { name: 'p' },
    )
    .to('out');
  return a;
}

/** Records every RocksDB batch the task's state writes. */
function spyBatches(st: RocksTaskState): WriteOp[][] {
  const batches: WriteOp[][] = [];
  const rocks = st.rocks;
  const write = rocks.writeSync.bind(rocks);
  rocks.writeSync = (ops, meta) => {
    batches.push([...ops]);
    write(ops, meta);
  };
  return batches;
}

test('one more map entry or list element after N should cost one changelog record and one RocksDB key each, not N+1', async () => {
  const N = 2000;
  const h = await taskHarness(app('unit-entries'));
  const st = h.task.stateStore as RocksTaskState;
  h.task.process('in', [h.rec('a', { op: 'fill', n: N }, 1)], () => undefined);
  // Checkpoint semantics kept: nothing reaches RocksDB before the transaction commits.
  assert.equal(st.rocks.scanSync('p-m').length, 0, 'dirty entries wait for the checkpoint');
  let out = await h.checkpoint();
  assert.equal(out.get('unit-entries-p-m-changelog')!.length, N, 'one record per map entry');
  assert.equal(out.get('unit-entries-p-l-changelog')!.length, N, 'one record per list element');
  assert.equal(st.rocks.scanSync('p-m').length, N);
  assert.equal(st.rocks.scanSync('p-l').length, N);

  const batches = spyBatches(st);
  h.task.process('in', [h.rec('a', { op: 'put', k: 'new' }, 2)], () => undefined);
  out = await h.checkpoint();
  for (const store of ['p-m', 'p-l']) {
    const records = out.get(`unit-entries-${store}-changelog`)!;
    assert.equal(records.length, 1, `${store}: one changelog record for one entry`);
    assert.ok(
      records[0]!.value!.length < 16,
      `${store}: the record holds one entry, not the whole collection`,
    );
    const ops = batches.flat().filter((o) => o.store === store);
    assert.equal(ops.length, 1, `${store}: one RocksDB key written`);
  }
  assert.deepEqual(h.values(out, 'out'), [{ size: N + 1, len: N + 1 }]);

  // A delete is one tombstone for its entry.
  h.task.process('in', [h.rec('a', { op: 'del', k: 'k00007' }, 3)], () => undefined);
  out = await h.checkpoint();
  const del = out.get('unit-entries-p-m-changelog')!;
  assert.equal(del.length, 1);
  assert.equal(del[0]!.value, null, 'a tombstone');
  assert.equal(out.get('unit-entries-p-l-changelog'), undefined, 'the list was not touched');

  // Clearing deletes every entry of the key (and only of that key).
  h.task.process(
    'in',
    [h.rec('b', { op: 'fill', n: 3 }, 4), h.rec('a', { op: 'clear' }, 5)],
    () => undefined,
  );
  out = await h.checkpoint();
  const cleared = out.get('unit-entries-p-m-changelog')!;
  assert.equal(cleared.filter((r) => r.value === null).length, N, 'a tombstone per entry of a');
  assert.equal(cleared.filter((r) => r.value !== null).length, 3, 'the three entries of b');
  assert.equal(st.rocks.scanSync('p-m').length, 3);
  assert.equal(st.rocks.scanSync('p-l').length, 3);
  assert.deepEqual(
    st.read('p-m', Buffer.from('b')),
    new Map([
      ['k00000', 0],
      ['k00001', 1],
      ['k00002', 2],
    ]),
  );
  assert.deepEqual(st.read('p-l', Buffer.from('b')), [0, 1, 2]);
  assert.equal(st.read('p-m', Buffer.from('a')), undefined);
  await h.task.close({ checkpoint: false });
});

test('a map larger than the write-back cache should read whole and the cache should stay within its bound once checkpointed', async () => {
  const N = 3000;
  const cacheMaxBytes = 64 * 1024;
  const h = await taskHarness(app('unit-entries-bound'), { state: { cacheMaxBytes } });
  const st = h.task.stateStore as RocksTaskState;
  h.task.process('in', [h.rec('a', { op: 'fill', n: N }, 1)], () => undefined);
  await h.checkpoint();
  assert.ok(st.cache.bytes <= cacheMaxBytes, `cache ${st.cache.bytes} B within ${cacheMaxBytes} B`);
  h.task.process('in', [h.rec('a', { op: 'put', k: 'zz' }, 2)], () => undefined);
  const out = await h.checkpoint();
  assert.deepEqual(h.values(out, 'out'), [{ size: N + 1, len: N + 1 }], 'read whole from RocksDB');
  assert.equal(out.get('unit-entries-bound-p-m-changelog')!.length, 1);
  assert.ok(st.cache.bytes <= cacheMaxBytes);
  await h.task.close({ checkpoint: false });
});

for (const storage of ['memory', 'rocksdb'] as const) {
  test(`a restore from the changelog alone (${storage}) should rebuild the same entries, and the next put costs one record`, async () => {
    const driver = new TestDriver(app(`unit-entries-${storage}`), { state: storage, partitions: 2 });
    try {
      const input = driver.input('in');
      await input.pipe('a', { op: 'fill', n: 50 });
      await input.pipe('b', { op: 'fill', n: 5 });
      await input.pipe('a', { op: 'del', k: 'k00003' });
      const before = { a: driver.state('p-m').get('a'), l: driver.state('p-l').get('a') };
      assert.equal((before.a as Map<string, number>).size, 49);
      await driver.crash({ wipeState: true });
      await driver.restart();
      assert.deepEqual(driver.state('p-m').get('a'), before.a);
      assert.deepEqual(driver.state('p-l').get('a'), before.l);
      assert.deepEqual(
        driver
          .state('p-m')
          .all()
          .map((e) => [e.key, (e.value as Map<string, number>).size]),
        [
          ['a', 49],
          ['b', 5],
        ],
      );
      const changelog = `unit-entries-${storage}-p-m-changelog`;
      const count = () => driver.kafka.readAll(changelog).length;
      const n = count();
      await input.pipe('a', { op: 'put', k: 'after' });
      assert.equal(count() - n, 1, 'one changelog record after the restore too');
      assert.deepEqual(driver.output('out').readValues().at(-1), { size: 50, len: 51 });
    } finally {
      await driver.close();
    }
  });
}
