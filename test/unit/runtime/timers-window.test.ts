import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { KeyedState } from '../../../src/runtime/task-state.js';
import { TimerService } from '../../../src/runtime/timers.js';
import { encodeTimerKey } from '../../../src/state/key-codec.js';
import { RocksStore } from '../../../src/state/rocks-store.js';
import { WriteBackCache } from '../../../src/state/write-back-cache.js';

/**
 * Issue 13.6: timers live in RocksDB in time order and only a bounded window of the earliest is
 * in memory, so a task with many timers starts without a full synchronous scan; they still fire
 * in order, exactly once, across a restart.
 */
const STORE = 'p-timers';
const N = 200_000;
/** What the service may hold: two windows per domain (TIMER_WINDOW = 1024) and recent registrations. */
const BOUND = 4 * 1024 + 600;

function keyedState(rocks: RocksStore) {
  const cache = new WriteBackCache<unknown>({
    maxBytes: 8 * 1024 * 1024,
    loader: (store, key) => {
      const raw = rocks.getSync(store, key);
      return { value: raw === undefined ? undefined : 1, size: 64 + key.length };
    },
  });
  let rowsRead = 0;
  const counted = new Proxy(rocks, {
    get(target, prop) {
      if (prop === 'scanSync')
        return (store: string, opts: object) => {
          const rows = target.scanSync(store, opts);
          rowsRead += rows.length;
          return rows;
        };
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  const st: KeyedState = { rocks: counted, cache, noteWrite() {}, registerTimers() {} };
  return { st, cache, rowsRead: () => rowsRead };
}

/** What a checkpoint does to the timer store: the dirty entries into RocksDB, then clean. */
function commit(rocks: RocksStore, cache: WriteBackCache<unknown>, t: TimerService): void {
  t.snapshot();
  const ops = cache
    .dirty()
    .map((e) => ({ store: e.store, key: e.key, value: e.value === undefined ? null : Buffer.of(1) }));
  rocks.writeSync(ops);
  cache.markClean();
  t.committed();
}

test('200k stored timers should start with a bounded window in memory and fire in order, exactly once, across a restart', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-timers-'));
  const rocks = await RocksStore.open({ dir, stores: [STORE] });
  try {
    // 200k event-time timers of 1000 keys, as a restore leaves them in RocksDB.
    const want: string[] = [];
    for (let start = 0; start < N; start += 10_000) {
      const ops = [];
      for (let i = start; i < start + 10_000; i++) {
        const ts = 1_000_000 + i * 10;
        const key = Buffer.from(`k${i % 1000}`);
        ops.push({
          store: STORE,
          key: Buffer.concat([Buffer.of(0), encodeTimerKey(ts, key)]),
          value: Buffer.of(1),
        });
        want.push(`${ts}/k${i % 1000}`);
      }
      rocks.writeSync(ops);
    }

    // Start: no scan of the whole store.
    let s = keyedState(rocks);
    const began = performance.now();
    let timers = new TimerService(STORE, s.st, { bytes: Buffer.alloc(0) });
    const startMs = performance.now() - began;
    assert.ok(s.rowsRead() <= 2 * 1024, `start read ${s.rowsRead()} timers from RocksDB, want ≤ 2048`);
    assert.ok(timers.inMemory <= BOUND, `${timers.inMemory} timers in memory at start`);
    process.stderr.write(
      `# timer service start with ${N} stored timers: ${startMs.toFixed(1)} ms, ${s.rowsRead()} rows read\n`,
    );

    const fired: string[] = [];
    const scope = { bytes: Buffer.alloc(0) };
    const wire = (t: TimerService) => {
      t.onFire = (ts, key) => fired.push(`${ts}/${key}`);
    };
    wire(timers);
    let maxInMemory = 0;
    const fireTo = (t: TimerService, upTo: number, step: number) => {
      for (let w = 1_000_000; w <= upTo; w += step) {
        t.fire('event', w);
        maxInMemory = Math.max(maxInMemory, t.inMemory);
      }
    };
    // A third fired and committed; the service reads its next windows as it goes.
    fireTo(timers, 1_000_000 + (N / 3) * 10, 5_000);
    commit(rocks, s.cache, timers);
    const committed = fired.length;
    // A bit more fired, not committed: a crash loses it, and the restart fires it again.
    fireTo(timers, 1_000_000 + (N / 2) * 10, 5_000);
    assert.ok(fired.length > committed);
    fired.length = committed;

    // Restart from what RocksDB holds (the crash dropped the cache's uncommitted deletes).
    s = keyedState(rocks);
    timers = new TimerService(STORE, s.st, scope);
    assert.ok(s.rowsRead() <= 2 * 1024, `restart read ${s.rowsRead()} timers`);
    wire(timers);
    fireTo(timers, 1_000_000 + N * 10, 5_000);
    commit(rocks, s.cache, timers);
    assert.equal(fired.length, N, 'every timer fired once');
    assert.deepEqual(fired, want, 'in time order');
    assert.ok(maxInMemory <= BOUND, `at most ${maxInMemory} timers in memory while firing`);
    assert.equal(rocks.scanSync(STORE).length, 0, 'fired timers are deleted');
  } finally {
    await rocks.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('timers registered and cancelled past the window should fire in order with the stored ones, before and after their checkpoint', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-timers-'));
  const rocks = await RocksStore.open({ dir, stores: [STORE] });
  try {
    const scope = { bytes: Buffer.from('a') };
    const s = keyedState(rocks);
    const t = new TimerService(STORE, s.st, scope);
    const fired: number[] = [];
    t.onFire = (ts) => fired.push(ts);
    // 5000 timers: more than two windows, so most lie past the horizon once the window shrinks.
    const all: number[] = [];
    for (let i = 0; i < 5000; i++) {
      const ts = (i * 7919) % 5000; // a permutation of 0..4999
      t.api.atEventTime(ts);
      all.push(ts);
    }
    assert.ok(t.inMemory <= 5000);
    commit(rocks, s.cache, t);
    assert.ok(t.inMemory <= BOUND, `${t.inMemory} in memory after the checkpoint`);
    // Past the window, uncommitted: a new one, a duplicate, and cancels of stored and new ones.
    t.api.atEventTime(4500.5); // floored to 4500: a duplicate of a stored one
    t.api.atEventTime(6000);
    t.api.atEventTime(7000);
    t.api.cancelEventTime(7000);
    t.api.cancelEventTime(4000);
    t.api.atEventTime(100); // inside the window: a duplicate
    const expected = [...all.filter((x) => x !== 4000), 6000].sort((a, b) => a - b);
    for (let w = 0; w <= 3000; w += 250) t.fire('event', w);
    commit(rocks, s.cache, t);
    for (let w = 3000; w <= 8000; w += 250) t.fire('event', w);
    assert.deepEqual(fired, expected);
    commit(rocks, s.cache, t);
    assert.equal(rocks.scanSync(STORE).length, 0);
  } finally {
    await rocks.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
