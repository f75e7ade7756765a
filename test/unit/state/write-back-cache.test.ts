import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { RocksStore } from '../../../src/state/rocks-store.js';
import { type Loaded, WriteBackCache } from '../../../src/state/write-back-cache.js';

const k = (s: string) => Buffer.from(s);

/** A cache over a Map standing in for RocksDB, counting loader calls. */
function mapCache(maxBytes: number, backing = new Map<string, string>()) {
  const loads: string[] = [];
  const cache = new WriteBackCache<string>({
    maxBytes,
    loader: (store, key) => {
      loads.push(`${store}/${key}`);
      return { value: backing.get(`${store}/${key}`), size: 10 };
    },
  });
  return { cache, loads, backing };
}

test('write-back cache should count hits and misses and cache absent keys', () => {
  const { cache, loads } = mapCache(1000, new Map([['s/a', 'A']]));
  assert.equal(cache.get('s', k('a')), 'A');
  assert.equal(cache.get('s', k('a')), 'A');
  assert.equal(cache.get('s', k('zz')), undefined);
  assert.equal(cache.get('s', k('zz')), undefined);
  assert.equal(cache.get('t', k('a')), undefined, 'stores are separate');
  assert.deepEqual(loads, ['s/a', 's/zz', 't/a']);
  assert.equal(cache.hits, 2);
  assert.equal(cache.misses, 3);
  assert.equal(cache.entries, 3);
  assert.equal(cache.bytes, 30);
});

test('write-back cache should serve writes and tombstones without loading', () => {
  const { cache, loads } = mapCache(1000, new Map([['s/a', 'A']]));
  cache.set('s', k('a'), 'A2', 12);
  cache.delete('s', k('b'));
  assert.equal(cache.get('s', k('a')), 'A2');
  assert.equal(cache.get('s', k('b')), undefined);
  assert.deepEqual(loads, []);
  assert.equal(cache.hits, 2);
  assert.equal(cache.dirtyEntries, 2);
  assert.equal(cache.bytes, 12 + 1 + 48);
  const dirty = cache.dirty();
  assert.deepEqual(
    dirty.map((d) => [d.store, d.key.toString(), d.value]),
    [
      ['s', 'a', 'A2'],
      ['s', 'b', undefined],
    ],
  );
});

test('write-back cache should evict the least recently used clean entries', () => {
  const { cache, loads } = mapCache(50);
  for (const name of ['a', 'b', 'c', 'd', 'e']) cache.get('s', k(name));
  cache.get('s', k('a')); // a is now the most recently used
  cache.get('s', k('f')); // over by 10: evicts b
  assert.equal(cache.evictions, 1);
  assert.equal(cache.bytes, 50);
  assert.ok(cache.has('s', k('a')));
  assert.ok(!cache.has('s', k('b')));
  loads.length = 0;
  cache.get('s', k('b'));
  assert.deepEqual(loads, ['s/b'], 'an evicted key is loaded again');
  assert.ok(!cache.has('s', k('c')), 'c was next in line');
});

test('write-back cache should evict down to a smaller bound at once and use a larger one', () => {
  const { cache } = mapCache(100);
  for (let i = 0; i < 10; i++) cache.get('s', k(`c${i}`));
  cache.set('s', k('d'), 'v', 10);
  assert.equal(cache.bytes, 100, 'one clean entry made room for the write');
  cache.resize(30);
  assert.equal(cache.bytes, 30, 'clean entries went at once');
  assert.ok(cache.has('s', k('d')), 'the dirty entry stays');
  assert.ok(cache.has('s', k('c9')) && !cache.has('s', k('c7')), 'the most recently used stay');
  cache.resize(60);
  for (let i = 0; i < 10; i++) cache.get('s', k(`n${i}`));
  assert.equal(cache.bytes, 60);
  assert.throws(() => cache.resize(-1), /maxBytes must be >= 0/);
});

test('write-back cache should never evict dirty entries', () => {
  const { cache } = mapCache(50);
  for (let i = 0; i < 3; i++) cache.get('s', k(`clean${i}`));
  for (let i = 0; i < 10; i++) cache.set('s', k(`dirty${i}`), `v${i}`, 10);
  assert.equal(cache.evictions, 3, 'only the clean entries went');
  assert.equal(cache.bytes, 100);
  assert.equal(cache.dirtyEntries, 10);
  for (let i = 0; i < 10; i++) assert.equal(cache.get('s', k(`dirty${i}`)), `v${i}`);
  cache.get('s', k('x')); // a clean insert over the bound evicts itself, not a dirty entry
  assert.equal(cache.dirtyEntries, 10);
  assert.equal(cache.dirty().length, 10);
  cache.markClean();
  assert.equal(cache.dirtyEntries, 0);
  assert.equal(cache.bytes, 50, 'clean again, so evictable down to the bound');
  assert.ok(cache.has('s', k('dirty9')), 'the most recently cleaned stay');
  assert.ok(!cache.has('s', k('dirty0')));
});

test('write-back cache should keep writes made after the snapshot dirty', () => {
  const { cache } = mapCache(1000);
  cache.set('s', k('a'), '1', 10);
  cache.set('s', k('b'), '1', 10);
  const snapshot = cache.dirty();
  assert.equal(snapshot.length, 2);
  cache.set('s', k('b'), '2', 10); // written while the checkpoint is in flight
  cache.set('s', k('c'), '1', 10);
  cache.markClean();
  assert.deepEqual(
    cache.dirty().map((d) => [d.key.toString(), d.value]),
    [
      ['b', '2'],
      ['c', '1'],
    ],
  );
});

test('write-back cache should clear one store, dirty entries included', () => {
  const { cache } = mapCache(1000);
  cache.get('s', k('a'));
  cache.set('s', k('b'), 'B', 10);
  cache.set('t', k('b'), 'B', 10);
  cache.clearStore('s');
  assert.equal(cache.entries, 1);
  assert.equal(cache.bytes, 10);
  assert.deepEqual(
    cache.dirty().map((d) => d.store),
    ['t'],
  );
});

/** Opens a store in a temp folder; one after-hook closes it, then removes the folder. */
async function tempStore(t: TestContext, stores: string[]): Promise<RocksStore> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-cache-'));
  const rocks = await RocksStore.open({ dir: join(dir, 'task'), stores });
  t.after(async () => {
    await rocks.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return rocks;
}

test('write-back cache should fall back to RocksDB after clear() drops uncommitted writes (a task reset)', async (t) => {
  const rocks = await tempStore(t, ['counts']);
  const loaded: Loaded<number> = { value: undefined, size: 0 };
  const cache = new WriteBackCache<number>({
    maxBytes: 1 << 20,
    loader: (store, key) => {
      const raw = rocks.getSync(store, key);
      loaded.value = raw === undefined ? undefined : raw.readUInt32BE(0);
      loaded.size = key.length + 4 + 64;
      return loaded;
    },
  });
  const u32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    return b;
  };
  const checkpoint = async () => {
    const ops = cache
      .dirty()
      .map((d) => ({ store: d.store, key: d.key, value: d.value === undefined ? null : u32(d.value) }));
    await rocks.write(ops);
    cache.markClean();
  };

  cache.set('counts', k('a'), 1, 72);
  cache.set('counts', k('b'), 2, 72);
  await checkpoint();
  assert.equal(rocks.getSync('counts', k('a'))?.readUInt32BE(0), 1);

  // An uncommitted transaction: overwrite a, delete b, add c, then fail.
  cache.set('counts', k('a'), 100, 72);
  cache.delete('counts', k('b'));
  cache.set('counts', k('c'), 3, 72);
  assert.equal(cache.get('counts', k('b')), undefined);
  cache.clear();
  assert.equal(cache.dirtyEntries, 0);
  const missesBefore = cache.misses;
  assert.equal(cache.get('counts', k('a')), 1);
  assert.equal(cache.get('counts', k('b')), 2);
  assert.equal(cache.get('counts', k('c')), undefined);
  assert.equal(cache.misses - missesBefore, 3, 'each came from RocksDB');

  // And a committed delete reaches RocksDB as a delete.
  cache.delete('counts', k('a'));
  await checkpoint();
  assert.equal(rocks.getSync('counts', k('a')), undefined);
});

test('write-back cache groups should overlay cached entries on the rows read, serve a complete group from memory, and lose completeness on eviction', () => {
  const rowsOf = new Map([
    ['ga', 'A'],
    ['gb', 'B'],
    ['gc', 'C'],
  ]);
  let reads = 0;
  const cache = new WriteBackCache<string>({
    maxBytes: 1000,
    loader: (_s, key) => ({ value: rowsOf.get(key.toString()), size: 10 }),
    groupOf: (_s, key) => (key[0] === 0x67 /* g */ ? 1 : 0),
  });
  const load = () => {
    reads++;
    return [...rowsOf].map(([k, v]) => [Buffer.from(k), v, 10] as const);
  };
  const scan = () => cache.scanGroup('s', k('g'), load).map(([key, v]) => `${key}=${v}`);
  cache.set('s', k('gb'), 'B2', 10); // dirty: wins over the row
  cache.delete('s', k('gc')); // tombstone: hides the row
  cache.set('s', k('gd'), 'D', 10); // not in RocksDB yet
  assert.deepEqual(scan(), ['ga=A', 'gb=B2', 'gd=D']);
  assert.equal(reads, 1);
  assert.deepEqual(scan(), ['ga=A', 'gb=B2', 'gd=D'], 'complete: from memory');
  assert.equal(reads, 1);
  cache.set('s', k('g0'), 'Z', 10); // a new member of a complete group is seen without a read
  assert.deepEqual(scan(), ['g0=Z', 'ga=A', 'gb=B2', 'gd=D']);
  assert.equal(reads, 1);
  assert.equal(
    cache.lastInGroup('s', k('g'), () => assert.fail('complete: no RocksDB read'))?.toString(),
    'gd',
  );
  // Evicting a clean member (ga) makes the group incomplete: the next scan reads RocksDB again.
  cache.resize(cache.bytes - 1);
  cache.resize(1000);
  assert.deepEqual(scan(), ['g0=Z', 'ga=A', 'gb=B2', 'gd=D']);
  assert.equal(reads, 2);
  assert.equal(
    cache.lastInGroup('h', k('h'), () => Buffer.from('h9'))?.toString(),
    'h9',
    'uncached: from RocksDB',
  );
});
