import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { RocksStore, type ScanOptions, type WriteOp } from '../../../src/state/rocks-store.js';
import { MemoryStorage } from '../../../src/testing/memory-store.js';
import { rng } from '../../helpers/running-sum.js';

/**
 * The test driver's in-memory store must answer range reads as RocksDB does (map and list state,
 * timers and the state views read ranges): same rows, same order, for every bound, reverse and limit.
 */
test('MemoryStore range reads should equal RocksDB over random batches of puts and deletes', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-memstore-'));
  const rocks = await RocksStore.open({ dir, stores: ['s'] });
  const mem = await new MemoryStorage().open({ dir: '/mem/0_0', stores: ['s'] });
  const r = rng(7);
  const key = () =>
    Buffer.from(
      Array.from({ length: 1 + Math.floor(r() * 4) }, () => [0, 1, 0x7f, 0x80, 0xff][Math.floor(r() * 5)]!),
    );
  try {
    for (let round = 0; round < 200; round++) {
      const ops: WriteOp[] = [];
      for (let i = 0; i < 20; i++)
        ops.push({ store: 's', key: key(), value: r() < 0.3 ? null : Buffer.of(round, i) });
      rocks.writeSync(ops);
      mem.writeSync(ops);
      for (let q = 0; q < 5; q++) {
        const opts: ScanOptions = {};
        if (r() < 0.5) opts[r() < 0.5 ? 'gt' : 'gte'] = key();
        if (r() < 0.5) opts[r() < 0.5 ? 'lt' : 'lte'] = key();
        if (r() < 0.4) opts.reverse = true;
        if (r() < 0.4) opts.limit = Math.floor(r() * 6);
        const hex = (rows: Array<[Buffer, Buffer]>) =>
          rows.map(([k, v]) => `${k.toString('hex')}=${v.toString('hex')}`);
        assert.deepEqual(hex(mem.scanSync('s', opts)), hex(rocks.scanSync('s', opts)), JSON.stringify(opts));
      }
    }
  } finally {
    await rocks.close();
    await mem.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
