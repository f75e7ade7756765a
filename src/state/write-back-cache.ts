/**
 * The write-back cache in front of a task's RocksDB stores, holding decoded values.
 *
 * Reads hit the cache, else a synchronous loader (RocksDB `getSync` + decode) fills it clean.
 * Writes and deletes only mark entries dirty; at a checkpoint the runtime takes {@link dirty},
 * writes them to the changelogs, commits, writes them to RocksDB in one batch and then calls
 * {@link markClean}. A failed checkpoint resets the task, whose state close calls {@link clear}:
 * the uncommitted writes are forgotten and the next read goes back to RocksDB, which holds the
 * last committed state.
 *
 * Memory is bounded by `maxBytes`, counted with the sizes the caller gives. Over the bound, the
 * least recently used CLEAN entries are evicted; dirty entries stay until they are written, so the
 * bound can be exceeded by the dirty set of one checkpoint interval.
 *
 * Every operation is O(1) (apart from the checkpoint calls, which are O(dirty)). Keys are kept as
 * latin1 strings (one char per byte, so they compare like the bytes); the only allocation on a
 * read is that string. Clean entries sit in an intrusive doubly linked list in LRU order; dirty
 * entries are outside it, so eviction never has to skip them.
 *
 * Absent keys are cached too (negative caching), as are deletes (tombstones): `get` returns
 * `undefined` for both. `V` must therefore not include `undefined`.
 *
 * **Groups** (map and list state): with `groupOf`, a key whose first bytes name a group (the
 * entries of one record key's map or list) is indexed under it, so that {@link scanGroup} can
 * enumerate a group: the cached entries, dirty ones included, over what RocksDB holds. A group
 * read whole once is *complete* while none of its entries has been evicted, and is then served
 * from memory without a RocksDB range read.
 *
 * @example
 * const cache = new WriteBackCache<number>({
 *   maxBytes: 64 * 1024 * 1024,
 *   loader: (store, key) => {
 *     const raw = rocks.getSync(store, key);
 *     return { value: raw && decode(raw), size: key.length + (raw?.length ?? 0) + 64 };
 *   },
 * });
 * cache.set('counts', key, 3, key.length + 72);
 * for (const { store, key, value } of cache.dirty()) changelog.send(store, key, value);
 */

/** What a loader found: the decoded value (`undefined` when absent) and its approximate size. */
export interface Loaded<V> {
  value: V | undefined;
  size: number;
}

export interface WriteBackCacheOptions<V> {
  /** Bound on the summed sizes of the entries; dirty entries may exceed it. */
  maxBytes: number;
  /**
   * Synchronous read-through on a miss. It may return the same object every time. `k` is the key
   * as latin1 (the cache's form of it), for a loader that looks it up in maps of its own.
   */
  loader: (store: string, key: Buffer, k: string) => Loaded<V>;
  /**
   * How many leading bytes of `key` name its group (0: none). Called when an entry is created.
   * Keys of one group must share those bytes, and no group's bytes may start another's.
   */
  groupOf?: (store: string, key: Buffer) => number;
}

/** A row of a group read from RocksDB: the key, its decoded value and its approximate size. */
export type GroupRow<V> = readonly [key: Buffer, value: V, size: number];

export interface DirtyEntry<V> {
  store: string;
  key: Buffer;
  /** The key as latin1, as the cache holds it (no conversion for a consumer that keys maps by it). */
  k: string;
  /** `undefined` is a tombstone: delete the key. */
  value: V | undefined;
}

/** Size charged for a delete when the caller gives none: the key plus this. */
const TOMBSTONE_OVERHEAD = 48;

class Entry<V> {
  value: V | undefined;
  size: number;
  dirty: boolean;
  /** Sequence number of the last write, to clean only what a checkpoint captured. */
  seq: number;
  prev: Entry<V> | null = null;
  next: Entry<V> | null = null;
  /** The group the key belongs to, if any. */
  group: Group<V> | null = null;

  constructor(
    readonly store: string,
    readonly map: Map<string, Entry<V>>,
    readonly k: string,
    value: V | undefined,
    size: number,
    dirty: boolean,
    seq: number,
  ) {
    this.value = value;
    this.size = size;
    this.dirty = dirty;
    this.seq = seq;
  }
}

/** The cached entries of one group, and whether they are all of it. */
class Group<V> {
  readonly members = new Map<string, Entry<V>>();
  /** Every key of the group that RocksDB or the cache holds is a member. */
  complete = false;
  /** Members in key order, until membership changes. */
  sorted: Array<Entry<V>> | null = null;
  /** The greatest key that joined the group (latin1), tombstones included. */
  max: string | undefined;
  constructor(
    readonly groups: Map<string, Group<V>>,
    readonly id: string,
  ) {}
}

export class WriteBackCache<V> {
  private maxBytes: number;
  private readonly loader: (store: string, key: Buffer, k: string) => Loaded<V>;
  private readonly stores = new Map<string, Map<string, Entry<V>>>();
  private readonly groupOf: ((store: string, key: Buffer) => number) | undefined;
  /** Store → group id (the key's leading bytes, latin1) → group. */
  private readonly groups = new Map<string, Map<string, Group<V>>>();
  /** Sentinel of the clean-entry LRU list: `head.next` is the least recently used. */
  private readonly head: Entry<V>;
  private dirtyList: Array<Entry<V>> = [];
  private writeSeq = 0;
  /** `writeSeq` when {@link dirty} last took its snapshot; -1 when none is pending. */
  private snapshotSeq = -1;

  private _hits = 0;
  private _misses = 0;
  private _evictions = 0;
  private _bytes = 0;
  private _entries = 0;

  constructor(opts: WriteBackCacheOptions<V>) {
    if (!(opts.maxBytes >= 0)) throw new RangeError(`maxBytes must be >= 0, got ${opts.maxBytes}`);
    this.maxBytes = opts.maxBytes;
    this.loader = opts.loader;
    this.groupOf = opts.groupOf;
    this.head = new Entry<V>('', new Map(), '', undefined, 0, false, 0);
    this.head.prev = this.head;
    this.head.next = this.head;
  }

  /**
   * Changes the memory bound (a worker re-divides its cache budget when its tasks change) and
   * evicts clean entries down to it. Dirty entries stay until the next checkpoint.
   */
  resize(maxBytes: number): void {
    if (!(maxBytes >= 0)) throw new RangeError(`maxBytes must be >= 0, got ${maxBytes}`);
    this.maxBytes = maxBytes;
    this.evict();
  }

  /** Reads hit the cache (counting tombstones and cached absences). */
  get hits(): number {
    return this._hits;
  }
  /** Reads that went to the loader. */
  get misses(): number {
    return this._misses;
  }
  /** Clean entries dropped to stay under `maxBytes`. */
  get evictions(): number {
    return this._evictions;
  }
  /** The bound on the summed sizes of the entries. */
  get bound(): number {
    return this.maxBytes;
  }
  /** Summed sizes of all entries, dirty included. */
  get bytes(): number {
    return this._bytes;
  }
  get entries(): number {
    return this._entries;
  }
  get dirtyEntries(): number {
    return this.dirtyList.length;
  }

  /**
   * The value of `key`, or `undefined` when it is absent or deleted. `k`: the key as latin1, when
   * the caller has it already (it must be `key.toString('latin1')`), which saves the conversion.
   */
  get(store: string, key: Buffer, k: string = key.toString('latin1')): V | undefined {
    const map = this.storeMap(store);
    const e = map.get(k);
    if (e !== undefined) {
      this._hits++;
      if (!e.dirty) this.touch(e);
      return e.value;
    }
    this._misses++;
    const loaded = this.loader(store, key, k);
    this.join(store, key, this.insertClean(store, map, k, loaded.value, loaded.size));
    this.evict();
    return loaded.value;
  }

  /**
   * The live entries of a group (keys starting with `prefix`, which must be a whole group id),
   * in key order: from memory when the group is complete, else `load()` (a RocksDB range read of
   * the prefix, decoded) with the cached entries over it (dirty ones win; tombstones hide rows).
   * The rows read are cached clean and the group becomes complete, then the cache evicts down to
   * its bound (which may make the group incomplete again: the answer is whole all the same).
   */
  scanGroup(store: string, prefix: Buffer, load: () => ReadonlyArray<GroupRow<V>>): Array<[Buffer, V]> {
    const id = prefix.toString('latin1');
    let g = this.groups.get(store)?.get(id);
    if (g?.complete) {
      this._hits++;
      const out: Array<[Buffer, V]> = [];
      for (const e of this.sortedOf(g)) {
        if (!e.dirty) this.touch(e);
        if (e.value !== undefined) out.push([Buffer.from(e.k, 'latin1'), e.value]);
      }
      return out;
    }
    this._misses++;
    const rows = load();
    const map = this.storeMap(store);
    for (const [key, value, size] of rows) {
      const k = key.toString('latin1');
      const e = map.get(k);
      if (e === undefined) this.join(store, key, this.insertClean(store, map, k, value, size));
      else if (!e.dirty) this.touch(e);
    }
    g = this.groups.get(store)?.get(id);
    const out: Array<[Buffer, V]> = [];
    if (g !== undefined) {
      g.complete = true;
      for (const e of this.sortedOf(g))
        if (e.value !== undefined) out.push([Buffer.from(e.k, 'latin1'), e.value]);
    }
    this.evict();
    return out;
  }

  /**
   * The greatest key of a group that is cached (written or deleted since the last checkpoint
   * included) or, unless the group is complete, that `rocksLast` (a reverse RocksDB read of the
   * prefix, limit 1) finds: where a list appends. Neither loads nor touches anything.
   */
  lastInGroup(store: string, prefix: Buffer, rocksLast: () => Buffer | undefined): Buffer | undefined {
    const g = this.groups.get(store)?.get(prefix.toString('latin1'));
    let best = g?.max;
    if (g?.complete !== true) {
      const r = rocksLast()?.toString('latin1');
      if (r !== undefined && (best === undefined || r > best)) best = r;
    }
    return best === undefined ? undefined : Buffer.from(best, 'latin1');
  }

  /**
   * The cached entries of a group in key order, `undefined` values for deletes and absent keys,
   * without loading, touching or counting (for state queries, like {@link peek}).
   */
  peekGroup(store: string, prefix: Buffer): Array<[Buffer, V | undefined]> {
    const g = this.groups.get(store)?.get(prefix.toString('latin1'));
    if (g === undefined) return [];
    return this.sortedOf(g).map((e) => [Buffer.from(e.k, 'latin1'), e.value]);
  }

  /** The number of cached entries of a group (tombstones included); for tests. */
  groupSize(store: string, prefix: Buffer): number {
    return this.groups.get(store)?.get(prefix.toString('latin1'))?.members.size ?? 0;
  }

  /**
   * The cached entry of `key` without loading, touching or counting it (for state queries, which
   * must not disturb the LRU order or the hit rate): `undefined` when not cached, else its value
   * (`undefined` inside for an absent or deleted key).
   */
  peek(store: string, key: Buffer): { value: V | undefined } | undefined {
    const e = this.stores.get(store)?.get(key.toString('latin1'));
    return e === undefined ? undefined : { value: e.value };
  }

  /** Whether `key` is cached (without loading or touching it); `k` as in {@link get}. */
  has(store: string, key: Buffer, k: string = key.toString('latin1')): boolean {
    return this.stores.get(store)?.has(k) ?? false;
  }

  /**
   * Takes values read ahead of the records that need them (one RocksDB MultiGet for a batch's
   * keys): each key not cached yet becomes a clean entry of `load(i)` (the i-th key's value; none
   * when it gives `undefined`), as {@link get}'s load would make it. Cached keys are left alone:
   * the cache is as new as RocksDB or newer. The loads count as misses (the reads that then find
   * them, as hits). Returns how many entries it added. `ks`: the keys as latin1, when the caller
   * has them already.
   */
  fill(
    store: string,
    keys: readonly Buffer[],
    load: (i: number) => Loaded<V> | undefined,
    ks?: readonly string[],
  ): number {
    const map = this.storeMap(store);
    let n = 0;
    for (let i = 0; i < keys.length; i++) {
      const k = ks === undefined ? keys[i]!.toString('latin1') : ks[i]!;
      if (map.has(k)) continue;
      const l = load(i);
      if (l === undefined) continue;
      this.join(store, keys[i]!, this.insertClean(store, map, k, l.value, l.size));
      n++;
    }
    this._misses += n;
    if (n > 0) this.evict();
    return n;
  }

  /**
   * Sets `key` to `value` (dirty until the next checkpoint). `sizeBytes`: approximate entry size;
   * `k` as in {@link get}.
   */
  set(store: string, key: Buffer, value: V, sizeBytes: number, k?: string): void {
    this.write(store, key, value, sizeBytes, k);
  }

  /** Deletes `key`: a dirty tombstone, written as a delete at the next checkpoint. */
  delete(store: string, key: Buffer, sizeBytes = key.length + TOMBSTONE_OVERHEAD, k?: string): void {
    this.write(store, key, undefined, sizeBytes, k);
  }

  /**
   * The dirty entries, as a snapshot for a checkpoint. The next {@link markClean} cleans exactly
   * these, unless written again in between (those stay dirty for the next checkpoint).
   */
  dirty(): Array<DirtyEntry<V>> {
    this.snapshotSeq = this.writeSeq;
    const out = new Array<DirtyEntry<V>>(this.dirtyList.length);
    for (let i = 0; i < out.length; i++) {
      const e = this.dirtyList[i];
      out[i] = { store: e.store, key: Buffer.from(e.k, 'latin1'), k: e.k, value: e.value };
    }
    return out;
  }

  /** After the RocksDB batch of the last {@link dirty} snapshot succeeded: those entries are clean. */
  markClean(): void {
    const upTo = this.snapshotSeq;
    this.snapshotSeq = -1;
    let kept = 0;
    const list = this.dirtyList;
    for (let i = 0; i < list.length; i++) {
      const e = list[i];
      if (e.seq <= upTo) {
        e.dirty = false;
        this.linkTail(e);
      } else {
        list[kept++] = e;
      }
    }
    list.length = kept;
    this.evict();
  }

  /** Drops every entry of one store, dirty ones included (its RocksDB data was wiped). */
  clearStore(store: string): void {
    const map = this.stores.get(store);
    if (map === undefined) return;
    for (const e of map.values()) {
      if (!e.dirty) this.unlink(e);
      this._bytes -= e.size;
      this._entries--;
    }
    map.clear();
    this.groups.delete(store);
    this.dirtyList = this.dirtyList.filter((e) => e.store !== store);
  }

  /** Drops everything, dirty entries included. Counters other than bytes and entries remain. */
  clear(): void {
    for (const map of this.stores.values()) map.clear();
    this.groups.clear();
    this.head.prev = this.head;
    this.head.next = this.head;
    this.dirtyList = [];
    this.snapshotSeq = -1;
    this._bytes = 0;
    this._entries = 0;
  }

  private write(
    store: string,
    key: Buffer,
    value: V | undefined,
    size: number,
    k: string = key.toString('latin1'),
  ): void {
    const map = this.storeMap(store);
    const seq = ++this.writeSeq;
    const e = map.get(k);
    if (e === undefined) {
      const created = new Entry(store, map, k, value, size, true, seq);
      map.set(k, created);
      this.dirtyList.push(created);
      this._entries++;
      this._bytes += size;
      this.join(store, key, created);
    } else {
      this._bytes += size - e.size;
      e.value = value;
      e.size = size;
      e.seq = seq;
      if (!e.dirty) {
        this.unlink(e);
        e.dirty = true;
        this.dirtyList.push(e);
      }
    }
    if (this._bytes > this.maxBytes) this.evict();
  }

  private insertClean(
    store: string,
    map: Map<string, Entry<V>>,
    k: string,
    value: V | undefined,
    size: number,
  ): Entry<V> {
    const e = new Entry(store, map, k, value, size, false, 0);
    map.set(k, e);
    this.linkTail(e);
    this._entries++;
    this._bytes += size;
    return e;
  }

  /** Adds a new entry to its group (when `groupOf` names one). */
  private join(store: string, key: Buffer, e: Entry<V>): void {
    if (this.groupOf === undefined) return;
    const n = this.groupOf(store, key);
    if (!(n > 0)) return;
    const id = e.k.slice(0, n);
    let groups = this.groups.get(store);
    if (groups === undefined) this.groups.set(store, (groups = new Map()));
    let g = groups.get(id);
    if (g === undefined) groups.set(id, (g = new Group<V>(groups, id)));
    g.members.set(e.k, e);
    g.sorted = null;
    if (g.max === undefined || e.k > g.max) g.max = e.k;
    e.group = g;
  }

  private sortedOf(g: Group<V>): Array<Entry<V>> {
    if (g.sorted === null)
      g.sorted = [...g.members.values()].sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : 0));
    return g.sorted;
  }

  private storeMap(store: string): Map<string, Entry<V>> {
    let map = this.stores.get(store);
    if (map === undefined) {
      map = new Map();
      this.stores.set(store, map);
    }
    return map;
  }

  private evict(): void {
    const head = this.head;
    while (this._bytes > this.maxBytes && head.next !== head) {
      const e = head.next!;
      this.remove(e);
      this._evictions++;
    }
  }

  private remove(e: Entry<V>): void {
    if (!e.dirty) this.unlink(e);
    const g = e.group;
    if (g !== null) {
      // The group lost an entry that RocksDB still holds: it must be read from there again.
      g.members.delete(e.k);
      // (An absent key's entry going changes nothing: RocksDB lacks it too.)
      if (e.value !== undefined) g.complete = false;
      g.sorted = null;
      if (g.members.size === 0) g.groups.delete(g.id);
      e.group = null;
    }
    e.map.delete(e.k);
    this._bytes -= e.size;
    this._entries--;
  }

  private touch(e: Entry<V>): void {
    if (this.head.prev === e) return;
    this.unlink(e);
    this.linkTail(e);
  }

  private linkTail(e: Entry<V>): void {
    const head = this.head;
    const last = head.prev!;
    e.prev = last;
    e.next = head;
    last.next = e;
    head.prev = e;
  }

  private unlink(e: Entry<V>): void {
    const prev = e.prev;
    const next = e.next;
    if (prev !== null) prev.next = next;
    if (next !== null) next.prev = prev;
    e.prev = null;
    e.next = null;
  }
}
