import type { Serde } from '../api/serdes.js';
import type { RocksTaskState } from '../runtime/rocks-task-state.js';
import type { Task } from '../runtime/task.js';
import { decodeCollectionKey } from '../state/key-codec.js';

/** One store of the job, read across all its tasks: what a state query would answer, and more. */
export interface StateView<K = unknown, V = unknown> {
  readonly name: string;
  /** The key's value (uncommitted writes included, as a state query sees them), or undefined. */
  get(key: K): V | undefined;
  /**
   * Entries with keys in `[from, to)`, compared as the key serde's bytes (RocksDB's order), over
   * every task of the store; both bounds optional.
   */
  range(from?: K, to?: K): Array<{ key: K; value: V }>;
  /** Every entry of the store, in key-byte order. */
  all(): Array<{ key: K; value: V }>;
  /** How many keys the store holds. */
  readonly size: number;
}

/** The state of a store spread over the tasks of its sub-topology (`tasks()` is read per call). */
export function stateView<K, V>(name: string, keySerde: Serde<K>, tasks: () => Task[]): StateView<K, V> {
  const stateOf = (t: Task) => t.stateStore as RocksTaskState | undefined;
  const live = () => {
    const out: RocksTaskState[] = [];
    for (const t of tasks()) {
      const s = stateOf(t);
      if (s) out.push(s);
    }
    if (out.length === 0)
      throw new Error(`store ${name}: no task of it is running (crashed? call driver.restart())`);
    return out;
  };
  const inRange = (k: Buffer, from?: Buffer, to?: Buffer) =>
    !(from && Buffer.compare(k, from) < 0) && !(to && Buffer.compare(k, to) >= 0);
  /** A map or list store: one entry per map key or element, grouped here by record key. */
  const collections = (s: RocksTaskState, from?: Buffer, to?: Buffer) => {
    const keys = new Map<string, Buffer>();
    const add = (k: Buffer) => {
      const { key } = decodeCollectionKey(k);
      if (inRange(key, from, to)) keys.set(key.toString('latin1'), Buffer.from(key));
    };
    for (const [k] of s.rocks.scanSync(name)) add(k);
    for (const e of s.cache.dirty()) if (e.store === name) add(e.key);
    const out = new Map<string, { key: Buffer; value: unknown }>();
    for (const [id, key] of keys) {
      const value = s.read(name, key);
      if (value !== undefined) out.set(id, { key, value });
    }
    return out;
  };
  const entries = (from?: Buffer, to?: Buffer) => {
    const rows = new Map<string, { key: Buffer; value: unknown }>();
    for (const s of live()) {
      const info = s.stores.get(name)!;
      if (info.spec.descriptor.kind !== 'value') {
        for (const [k, r] of collections(s, from, to)) rows.set(k, r);
        continue;
      }
      const mine = new Map<string, { key: Buffer; value: unknown }>();
      // Committed state from RocksDB, then what the cache holds on top of it (uncommitted writes).
      const scan = s.rocks.scanSync(name, { ...(from ? { gte: from } : {}), ...(to ? { lt: to } : {}) });
      const committed = new Map<string, [Buffer, Buffer | null]>();
      for (const [k, v] of scan) committed.set(k.toString('latin1'), [k, v]);
      // Committed writes that RocksDB has not taken yet (write-behind.ts) are newer than its rows.
      for (const op of s.unwritten(name))
        if (inRange(op.key, from, to)) committed.set(op.key.toString('latin1'), [op.key, op.value]);
      for (const [id, [k, v]] of committed) {
        if (v === null) continue;
        const c = s.cache.peek(name, k);
        if (c?.value === undefined && c !== undefined) continue;
        mine.set(id, { key: k, value: c ? c.value : info.serde.deserialize(v) });
      }
      // Keys written since the last checkpoint and not yet in RocksDB. No checkpoint is in flight
      // while a test reads (the driver awaits each), so taking this snapshot disturbs none.
      for (const e of s.cache.dirty()) {
        if (e.store !== name) continue;
        if ((from && Buffer.compare(e.key, from) < 0) || (to && Buffer.compare(e.key, to) >= 0)) continue;
        const k = e.key.toString('latin1');
        if (e.value === undefined) mine.delete(k);
        else mine.set(k, { key: e.key, value: e.value });
      }
      for (const [k, r] of mine) rows.set(k, r);
    }
    return [...rows.values()]
      .sort((a, b) => Buffer.compare(a.key, b.key))
      .map((r) => ({ key: keySerde.deserialize(r.key), value: r.value as V }));
  };
  const bytesOf = (k: K | undefined) =>
    k === undefined ? undefined : (keySerde.serialize(k) ?? Buffer.alloc(0));
  return {
    name,
    get(key) {
      const kb = bytesOf(key)!;
      for (const s of live()) {
        const v = s.read(name, kb);
        if (v !== undefined) return v as V;
      }
      return undefined;
    },
    range: (from, to) => entries(bytesOf(from), bytesOf(to)),
    all: () => entries(),
    get size() {
      return entries().length;
    },
  };
}
