import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { loadConfig } from '../../../src/config/load.js';
import { TaskCorruptedError } from '../../../src/errors.js';
import type { InRecord } from '../../../src/kafka/types.js';
import { createLogger } from '../../../src/ops/logger.js';
import { createWorkerMetrics } from '../../../src/ops/metrics.js';
import { openTaskState } from '../../../src/runtime/restore.js';
import type { RocksTaskState, StateContext } from '../../../src/runtime/rocks-task-state.js';
import type { Task } from '../../../src/runtime/task.js';
import { recordHash } from '../../../src/state/checkpoint-meta.js';
import { RocksStore } from '../../../src/state/rocks-store.js';
import { ordersJoinUsers } from '../../helpers/apps.js';

/**
 * openTaskState against a fake changelog (admin offsets and a partition reader over an array):
 * which local folders it keeps, and which it wipes and restores.
 */
function setup(localCheckpointRecords?: number) {
  const sub = ordersJoinUsers('unit-open');
  assert.equal(sub.stores.length, 1);
  const store = sub.stores[0]!.name;
  const task = { id: '0_0', partition: 0, sub } as unknown as Task;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-open-'));
  const registry = new Registry();
  /** The changelog partition: its records and its log-start offset. */
  const log = { records: [] as InRecord[], low: 0n, reads: 0 };
  const high = () =>
    log.records.length > 0 ? BigInt(log.records[log.records.length - 1]!.offset) + 1n : log.low;
  const ctx: StateContext = {
    appId: 'unit-open',
    config: loadConfig({
      overrides: { kafka: { brokers: ['127.0.0.1:1'] }, state: { dir, localCheckpointRecords } },
      env: {},
    }),
    logger: createLogger({ level: 'silent', format: 'json' }),
    metrics: createWorkerMetrics(registry),
    client: {
      admin: async () => ({
        offsets: async () => [{ partition: 0, low: log.low.toString(), high: high().toString() }],
      }),
      partitionReader: () => ({
        endOffsets: async () => ({ low: log.low, high: high() }),
        read: async (o: { from: bigint; to: bigint; onRecords(r: InRecord[]): void }) => {
          log.reads++;
          const rs = log.records.filter((r) => BigInt(r.offset) >= o.from && BigInt(r.offset) < o.to);
          if (rs.length > 0) o.onRecords(rs);
          return rs.length;
        },
        close: async () => undefined,
      }),
    } as any,
  };
  const put = (name: string, ts = '1000') =>
    log.records.push({
      key: Buffer.from(name),
      value: Buffer.from(JSON.stringify({ name })),
      offset: high().toString(),
      timestamp: ts,
    });
  const open = async () => (await openTaskState(task, ctx)) as RocksTaskState;
  const corrupted = async () =>
    (await ctx.metrics.errors.get()).values.find((v) => v.labels.kind === 'state_corrupted')?.value ?? 0;
  const folder = join(dir, 'unit-open', '0_0');
  return { store, log, put, open, corrupted, folder };
}

test('a meta entry that does not decode should wipe the folder, restore it, and release the lock', async () => {
  const { store, put, open, corrupted, folder } = setup();
  put('ann');
  const rocks = await RocksStore.open({ dir: folder, stores: [store], taskId: '0_0' });
  rocks.writeSync([{ store, key: Buffer.from('stale'), value: Buffer.from('"x"') }], Buffer.from('{garbage'));
  await rocks.close();

  const s = await open();
  assert.equal(await corrupted(), 1);
  assert.equal(s.read(store, Buffer.from('stale')), undefined, 'the old folder is gone');
  assert.deepEqual(s.read(store, Buffer.from('ann')), { name: 'ann' }, 'restored from the changelog');
  await s.close();
  // The folder lock was released: it opens again, now with nothing to wipe.
  const again = await open();
  assert.equal(await corrupted(), 1);
  await again.close();
});

test('a folder whose fingerprinted record is still at its offset should replay only the tail', async () => {
  const { store, log, put, open, corrupted } = setup();
  put('ann');
  put('bob');
  await (await open()).close();
  put('cid');
  log.reads = 0;
  const s = await open();
  assert.equal(await corrupted(), 0);
  assert.deepEqual(s.read(store, Buffer.from('cid')), { name: 'cid' });
  assert.equal(log.reads, 2, 'one read to check the fingerprint, one for the tail');
  await s.close();
});

test('a changelog recreated and grown past the stored offset should be detected and the folder rebuilt', async () => {
  const { store, log, put, open, corrupted } = setup();
  put('ann');
  put('bob');
  await (await open()).close();
  // Recreated under the task and rewritten by another owner: longer, other records.
  log.records = [];
  for (const name of ['dan', 'eve', 'fay', 'gus']) put(name, '2000');
  const s = await open();
  assert.equal(await corrupted(), 1);
  assert.equal(s.read(store, Buffer.from('ann')), undefined, 'stale state is not kept');
  assert.deepEqual(s.read(store, Buffer.from('gus')), { name: 'gus' });
  await s.close();
});

test('a fingerprinted record compacted away should be detected and the folder rebuilt', async () => {
  const { store, log, put, open, corrupted } = setup();
  put('ann');
  put('bob');
  await (await open()).close();
  put('bob');
  // Compaction keeps the latest record per key: the fingerprinted offset 1 (bob) is gone.
  log.records = log.records.filter((r) => r.offset !== '1');
  const s = await open();
  assert.equal(await corrupted(), 1);
  assert.deepEqual(s.read(store, Buffer.from('bob')), { name: 'bob' });
  await s.close();
});

test('a checkpoint should record the fingerprint of its last changelog record, and refuse offsets that went backwards', async () => {
  const { store, log, put, open } = setup(0);
  put('ann');
  put('bob');
  const s = await open();
  const write = (names: string[]) => {
    for (const name of names) {
      s.cache.set(store, Buffer.from(name), { name }, 100);
      s.noteWrite();
    }
    const out = new Map<string, Array<{ key: Buffer | null; value: Buffer | null; timestamp?: string }>>();
    s.writeChangelog(out as any, 0);
    return [...out.values()][0]!;
  };
  const changelog = 'unit-open-' + store + '-changelog';
  // Two records at offsets 3 and 4 (2 was the previous transaction's commit marker).
  const sent = write(['cid', 'dan']);
  await s.commitLocal(new Map([[`${changelog}:0`, 4n]]));
  const rocks = s.rocks;
  const meta = JSON.parse(rocks.readMeta()!.toString());
  assert.equal(meta.changelogOffsets[store], '5');
  assert.deepEqual(meta.changelogLast[store], {
    offset: '4',
    timestamp: sent[1]!.timestamp,
    hash: recordHash(Buffer.from('dan'), sent[1]!.value),
  });
  // The changelog was recreated: this checkpoint's two records landed at offsets 0 and 1.
  write(['eve', 'fay']);
  await assert.rejects(
    s.commitLocal(new Map([[`${changelog}:0`, 1n]])),
    (e: unknown) => e instanceof TaskCorruptedError && /deleted and recreated/.test(e.message),
  );
  assert.equal(JSON.parse(rocks.readMeta()!.toString()).changelogOffsets[store], '5', 'nothing written');
  assert.equal(log.records.length, 2);
  await s.close();
});

test("a value store's committed writes should wait in memory, answer reads, reach RocksDB in one batch, and be replayed after a crash", async () => {
  const { store, log, put, open, corrupted } = setup(3);
  put('ann');
  put('bob');
  let s = await open();
  const changelog = 'unit-open-' + store + '-changelog';
  /** One checkpoint of `names`: its changelog records land in the log (as Kafka would take them). */
  const commit = async (names: string[]) => {
    for (const name of names) {
      s.cache.set(store, Buffer.from(name), { name }, 100);
      s.noteWrite();
    }
    const out = new Map<string, Array<{ key: Buffer | null; value: Buffer | null; timestamp: string }>>();
    s.writeChangelog(out as any, 0);
    for (const r of out.get(changelog)!)
      log.records.push({
        key: r.key,
        value: r.value,
        offset: String(log.records.length),
        timestamp: r.timestamp,
      });
    await s.commitLocal(new Map([[`${changelog}:0`, BigInt(log.records.length - 1)]]));
  };
  const stored = () => JSON.parse(s.rocks.readMeta()!.toString()).changelogOffsets[store];

  await commit(['cid', 'dan']); // offsets 2, 3: two records, fewer than 3
  assert.equal(stored(), '2', 'RocksDB still holds the state as of offset 2');
  const fingerprint = JSON.parse(s.rocks.readMeta()!.toString()).changelogLast[store];
  assert.equal(fingerprint.offset, '3', 'the fingerprint names the newest committed record');
  assert.equal(s.rocks.getSync(store, Buffer.from('cid')), undefined, 'cid is not in RocksDB yet');
  s.resizeCache(0); // the clean entries go: reads miss the cache
  s.resizeCache(1 << 20);
  assert.deepEqual(
    s.read(store, Buffer.from('cid')),
    { name: 'cid' },
    'a state query finds the waiting write',
  );
  assert.deepEqual(s.cache.get(store, Buffer.from('dan')), { name: 'dan' }, 'so does a record');

  // A crash: the process dies with the writes still waiting. The changelog has them.
  await s.rocks.close();
  s = await open();
  assert.equal(await corrupted(), 0, 'the older checkpoint is valid: no rebuild');
  assert.deepEqual(s.read(store, Buffer.from('dan')), { name: 'dan' }, 'replayed from offset 2');

  await commit(['eve']); // offset 4
  assert.equal(stored(), '4', 'the replay was written at the open');
  await commit(['fay', 'gus', 'hal']); // offsets 5-7: 4 records since, at least 3
  assert.equal(stored(), '8', 'RocksDB took them all in one batch');
  assert.ok(s.rocks.getSync(store, Buffer.from('eve')) !== undefined);
  assert.ok(s.rocks.getSync(store, Buffer.from('hal')) !== undefined);

  await commit(['ivy']); // offset 8, waiting
  await s.close({ clean: true }); // a clean close writes what waits: the next owner replays nothing
  log.reads = 0;
  s = await open();
  assert.equal(stored(), '9');
  assert.equal(log.reads, 1, 'only the fingerprint check reads the changelog');
  assert.deepEqual(s.read(store, Buffer.from('ivy')), { name: 'ivy' });
  await s.close();
});

test('a record superseded while writes wait should not make a crash rebuild the folder', async () => {
  const { store, log, put, open, corrupted } = setup(100);
  put('ann');
  put('bob');
  let s = await open(); // RocksDB at offset 2, its fingerprint the record at offset 1 (bob)
  const changelog = 'unit-open-' + store + '-changelog';
  s.cache.set(store, Buffer.from('bob'), { name: 'bob', v: 2 }, 100);
  s.noteWrite();
  const out = new Map<string, Array<{ key: Buffer | null; value: Buffer | null; timestamp: string }>>();
  s.writeChangelog(out as any, 0);
  const [r] = out.get(changelog)!;
  log.records.push({ key: r!.key, value: r!.value, offset: '2', timestamp: r!.timestamp });
  await s.commitLocal(new Map([[`${changelog}:0`, 2n]])); // waits: RocksDB stays at offset 2
  // Compaction keeps the newest record per key: bob's first record (offset 1) goes.
  log.records = log.records.filter((x) => x.offset !== '1');
  await s.rocks.close(); // a crash: the write that waited is lost with the process
  s = await open();
  assert.equal(await corrupted(), 0, 'the fingerprint named offset 2, which compaction keeps: no rebuild');
  assert.deepEqual(s.read(store, Buffer.from('bob')), { name: 'bob', v: 2 }, 'replayed from offset 2');
  assert.deepEqual(s.read(store, Buffer.from('ann')), { name: 'ann' });
  await s.close();
});
