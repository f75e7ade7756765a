/**
 * Micro-benchmark of the state layer: RocksDB batch writes, synchronous point and multi-key
 * reads, scans, and the write-back cache in front of them. Prints records/s.
 *
 *   npx tsc && node dist/bench/state-micro.js [records=200000] [valueBytes=100]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RocksStore } from '../src/state/rocks-store.js';
import { WriteBackCache } from '../src/state/write-back-cache.js';

const N = Number(process.argv[2] ?? 200_000);
const VALUE_BYTES = Number(process.argv[3] ?? 100);
const BATCH = 1000;
const MULTI = 100;

function keyOf(i: number): Buffer {
  const k = Buffer.alloc(16);
  k.writeUInt32BE(Math.imul(i, 2654435761) >>> 0, 0); // spread keys, as hashed user keys would be
  k.writeUInt32BE(i, 4);
  return k;
}

function report(name: string, records: number, started: bigint): void {
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const rate = Math.round(records / seconds);
  console.log(`${name.padEnd(34)} ${rate.toLocaleString('en-US').padStart(12)} records/s`);
}

async function main(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'sluice-bench-state-'));
  const db = await RocksStore.open({ dir: join(root, 'task'), stores: ['s'] });
  try {
    const keys = Array.from({ length: N }, (_, i) => keyOf(i));
    const value = Buffer.alloc(VALUE_BYTES, 7);
    const order = Array.from({ length: N }, (_, i) => i).sort(() => Math.random() - 0.5);
    console.log(`${N} records, ${VALUE_BYTES}-byte values, 16-byte keys, batches of ${BATCH}`);

    let t = process.hrtime.bigint();
    const ops = Array.from({ length: BATCH }, () => ({
      store: 's',
      key: keys[0],
      value: value as Buffer | null,
    }));
    for (let i = 0; i < N; i += BATCH) {
      for (let j = 0; j < BATCH; j++) ops[j].key = keys[i + j];
      await db.write(ops, Buffer.from(`{"offset":${i}}`));
    }
    report('write (batch put + meta)', N, t);

    t = process.hrtime.bigint();
    let found = 0;
    for (const i of order) if (db.getSync('s', keys[i]) !== undefined) found++;
    report('getSync (random, hit)', N, t);
    if (found !== N) throw new Error(`found ${found} of ${N}`);

    t = process.hrtime.bigint();
    for (let i = 0; i < N; i++) db.getSync('s', keyOf(N + i));
    report('getSync (miss)', N, t);

    t = process.hrtime.bigint();
    const group: Buffer[] = new Array(MULTI);
    for (let i = 0; i < N; i += MULTI) {
      for (let j = 0; j < MULTI; j++) group[j] = keys[order[i + j]];
      db.getManySync('s', group);
    }
    report(`getManySync (random, ${MULTI} keys)`, N, t);

    t = process.hrtime.bigint();
    let scanned = 0;
    for await (const _ of db.iterate('s')) scanned++;
    report('iterate (async, whole store)', scanned, t);

    const cache = new WriteBackCache<Buffer>({
      maxBytes: 256 * 1024 * 1024,
      loader: (store, key) => {
        const raw = db.getSync(store, key);
        return { value: raw, size: key.length + (raw?.length ?? 0) + 80 };
      },
    });
    t = process.hrtime.bigint();
    for (const i of order) cache.get('s', keys[i]);
    report('cache get (cold: miss + getSync)', N, t);
    t = process.hrtime.bigint();
    for (let r = 0; r < 5; r++) for (const i of order) cache.get('s', keys[i]);
    report('cache get (warm: hit)', 5 * N, t);
    t = process.hrtime.bigint();
    for (const i of order) cache.set('s', keys[i], value, 16 + VALUE_BYTES + 80);
    const dirty = cache.dirty();
    await db.write(dirty.map((d) => ({ store: d.store, key: d.key, value: d.value ?? null })));
    cache.markClean();
    report('cache set + checkpoint to RocksDB', N, t);
  } finally {
    await db.close();
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
