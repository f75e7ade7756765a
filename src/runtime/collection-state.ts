import type { Serde } from '../api/serdes.js';
import type { ListState, MapState } from '../api/state.js';
import { SluiceError } from '../errors.js';
import { collectionPrefix, decodeListIndex, encodeListIndex, prefixEnd } from '../state/key-codec.js';
import type { RocksStore } from '../state/rocks-store.js';
import type { GroupRow, WriteBackCache } from '../state/write-back-cache.js';
import { approxSize, type KeyedState } from './task-state.js';

/**
 * Map and list state, one store entry per map key and per list element (not one blob per record
 * key): the store key is `collectionPrefix(record key)` followed by the map key's bytes (its
 * serde's) or the element's index (8 bytes big-endian). So a `set` or an `add` dirties one cache
 * entry, which the checkpoint writes as one changelog record and one RocksDB key; a delete is a
 * tombstone for its entry; `clear` deletes each entry of the record key. Reads of a whole map or
 * list are a RocksDB range read of the prefix with the cached entries over it, and stay in the
 * write-back cache (`scanGroup`) until one of their entries is evicted.
 */

/** The key the handles of one process operator are scoped to right now. */
export interface KeyScope {
  bytes: Buffer;
  /** `bytes` as latin1 (the write-back cache's key), when known; reset whenever `bytes` changes. */
  id?: string | undefined;
}

/** How a handle copies values in and out: `copyValue`, or not at all for Sluice's own processors. */
export type Copy = <T>(v: T) => T;
export const live: Copy = (v) => v;

const EMPTY: Buffer = Buffer.alloc(0);

/** The RocksDB range of one record key's entries. */
function rangeOf(prefix: Buffer): { gte: Buffer; lt?: Buffer } {
  const lt = prefixEnd(prefix);
  return lt === undefined ? { gte: prefix } : { gte: prefix, lt };
}

/** The rows RocksDB holds under `prefix`, decoded with the entries' serde. */
function loadRows(
  rocks: RocksStore,
  store: string,
  serde: Serde<unknown>,
  prefix: Buffer,
): Array<GroupRow<unknown>> {
  const rows = rocks.scanSync(store, rangeOf(prefix));
  const out = new Array<GroupRow<unknown>>(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const [k, v] = rows[i]!;
    const value = serde.deserialize(v);
    out[i] = [k, value, approxSize(k, value)];
  }
  return out;
}

/** The prefix of the scope's record key, computed once per key. */
function prefixer(scope: KeyScope): () => Buffer {
  let of: Buffer | undefined;
  let prefix: Buffer = EMPTY;
  return () => {
    if (of !== scope.bytes) {
      of = scope.bytes;
      prefix = collectionPrefix(of);
    }
    return prefix;
  };
}

function refuseNull(what: string, v: unknown): void {
  if (v === null || v === undefined)
    throw new SluiceError(
      'SLUICE_OPERATOR',
      `${what}(${String(v)}): state entries cannot be null or undefined`,
    );
}

export function mapHandle(
  store: string,
  scope: KeyScope,
  st: KeyedState,
  copy: Copy,
  keySerde: Serde<unknown>,
  serde: Serde<unknown>,
): MapState<unknown, unknown> {
  const cache = st.cache;
  const pre = prefixer(scope);
  const entryKey = (k: unknown) => {
    const p = pre();
    const kb = keySerde.serialize(k) ?? EMPTY;
    const out = Buffer.allocUnsafe(p.length + kb.length);
    p.copy(out, 0);
    kb.copy(out, p.length);
    return out;
  };
  const all = () => {
    const p = pre();
    return { p, rows: cache.scanGroup(store, p, () => loadRows(st.rocks, store, serde, p)) };
  };
  return {
    get: (k) => copy(cache.get(store, entryKey(k))),
    has: (k) => cache.get(store, entryKey(k)) !== undefined,
    set(k, v) {
      refuseNull('mapState.set', v);
      const key = entryKey(k);
      cache.set(store, key, copy(v), approxSize(key, v));
      st.noteWrite();
    },
    delete(k) {
      const key = entryKey(k);
      if (cache.get(store, key) === undefined) return;
      cache.delete(store, key);
      st.noteWrite();
    },
    entries() {
      const { p, rows } = all();
      return (function* () {
        for (const [key, v] of rows)
          yield [keySerde.deserialize(key.subarray(p.length)), copy(v)] as [unknown, unknown];
      })();
    },
    keys() {
      const { p, rows } = all();
      return (function* () {
        for (const [key] of rows) yield keySerde.deserialize(key.subarray(p.length));
      })();
    },
    get size() {
      return all().rows.length;
    },
    clear() {
      const { rows } = all();
      for (const [key] of rows) cache.delete(store, key);
      if (rows.length > 0) st.noteWrite();
    },
  };
}

export function listHandle(
  store: string,
  scope: KeyScope,
  st: KeyedState,
  copy: Copy,
  serde: Serde<unknown>,
): ListState<unknown> {
  const cache = st.cache;
  const pre = prefixer(scope);
  const at = (p: Buffer, i: number) => Buffer.concat([p, encodeListIndex(i)], p.length + 8);
  const all = (p: Buffer) => cache.scanGroup(store, p, () => loadRows(st.rocks, store, serde, p));
  /** The index after the list's last element (written or deleted since the last checkpoint included). */
  const nextIndex = (p: Buffer): number => {
    const last = cache.lastInGroup(store, p, () => {
      const r = st.rocks.scanSync(store, { ...rangeOf(p), reverse: true, limit: 1 });
      return r.length === 0 ? undefined : r[0]![0];
    });
    return last === undefined ? 0 : decodeListIndex(last.subarray(p.length)) + 1;
  };
  const put = (p: Buffer, i: number, v: unknown) => {
    const key = at(p, i);
    cache.set(store, key, v, approxSize(key, v));
  };
  return {
    get() {
      const rows = all(pre());
      const out = new Array<unknown>(rows.length);
      for (let i = 0; i < rows.length; i++) out[i] = rows[i]![1];
      return copy(out);
    },
    add(value) {
      refuseNull('listState.add', value);
      const p = pre();
      put(p, nextIndex(p), copy(value));
      st.noteWrite();
    },
    update(values) {
      for (const v of values) refuseNull('listState.update', v);
      const p = pre();
      const before = all(p);
      const vs = copy === live ? values : copy(values);
      for (let i = 0; i < vs.length; i++) put(p, i, vs[i]);
      // What lay past the new end: deleted (indices are dense from 0 after an update).
      const keep = new Set<string>();
      for (let i = 0; i < vs.length; i++) keep.add(at(p, i).toString('latin1'));
      for (const [key] of before) if (!keep.has(key.toString('latin1'))) cache.delete(store, key);
      st.noteWrite();
    },
    clear() {
      const rows = all(pre());
      for (const [key] of rows) cache.delete(store, key);
      if (rows.length > 0) st.noteWrite();
    },
  };
}

/**
 * One record key's map (a `Map`) or list (an array) for a state query or a test's state view:
 * RocksDB's rows with the cached entries over them, without touching the cache's LRU order;
 * `undefined` when empty.
 */
export function readCollection(
  rocks: RocksStore,
  cache: WriteBackCache<unknown>,
  store: string,
  kind: 'map' | 'list',
  keySerde: Serde<unknown> | undefined,
  serde: Serde<unknown>,
  recordKey: Buffer,
): Map<unknown, unknown> | unknown[] | undefined {
  const p = collectionPrefix(recordKey);
  const rows = new Map<string, [Buffer, unknown]>();
  for (const [k, v] of rocks.scanSync(store, rangeOf(p)))
    rows.set(k.toString('latin1'), [k, serde.deserialize(v)]);
  for (const [k, v] of cache.peekGroup(store, p)) {
    const id = k.toString('latin1');
    if (v === undefined) rows.delete(id);
    else rows.set(id, [k, v]);
  }
  if (rows.size === 0) return undefined;
  const sorted = [...rows.values()].sort((a, b) => Buffer.compare(a[0], b[0]));
  if (kind === 'list') return sorted.map(([, v]) => v);
  return new Map(sorted.map(([k, v]) => [keySerde!.deserialize(k.subarray(p.length)), v]));
}
