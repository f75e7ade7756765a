import { StateLockedError } from '../state/errors.js';
import type { RocksStore, RocksStoreOptions, ScanOptions, WriteOp } from '../state/rocks-store.js';

/** The contents of one task folder: store → key (latin1) → value, plus the meta entry. */
interface Folder {
  stores: Map<string, Map<string, Buffer>>;
  /** Store → its keys in order (latin1 compares like the bytes), for range reads. */
  sorted: Map<string, Index>;
  meta: Buffer | undefined;
}

/**
 * A store's keys in order, brought up to date at the next range read: keys put since then wait in
 * `added` and deletes are counted, so a batch costs O(batch) and the next read one merge.
 */
interface Index {
  keys: string[];
  added: string[];
  removed: number;
}

function newIndex(): Index {
  return { keys: [], added: [], removed: 0 };
}

/** The index's keys, merged with what was put and without what was deleted since. */
function current(ix: Index, present: ReadonlyMap<string, unknown>): string[] {
  if (ix.added.length === 0 && ix.removed === 0) return ix.keys;
  const add = ix.added.sort();
  const out: string[] = [];
  let i = 0;
  let j = 0;
  while (i < ix.keys.length || j < add.length) {
    const k = j >= add.length || (i < ix.keys.length && ix.keys[i]! <= add[j]!) ? ix.keys[i++]! : add[j++]!;
    if (out.length > 0 && out[out.length - 1] === k) continue;
    if (present.has(k)) out.push(k);
  }
  ix.keys = out;
  ix.added = [];
  ix.removed = 0;
  return out;
}

/** The first index of `keys` (sorted) whose key is ≥ `k` (or > `k` when `after`). */
function lowerBound(keys: readonly string[], k: string, after = false): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const m = keys[mid]!;
    if (m < k || (after && m === k)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * In-memory stand-ins for the RocksDB task folders of a test driver's workers: the same
 * interface as `RocksStore` (point reads, atomic batches with the meta entry, scans in unsigned
 * byte order of the keys, a lock against a second open), so `RocksTaskState`, its write-back
 * cache, the timers and the restore run unchanged on top. A folder outlives the store that had
 * it open, as a directory does: a crashed task's folder is there when it restarts.
 * Opening RocksDB costs 50–70 ms a task on the dev machine; this costs microseconds.
 */
export class MemoryStorage {
  readonly #folders = new Map<string, Folder>();
  readonly #open = new Set<string>();

  open = async (o: RocksStoreOptions): Promise<RocksStore> => {
    if (this.#open.has(o.dir)) throw new StateLockedError(o.dir, process.pid, 'opened twice in this process');
    let f = this.#folders.get(o.dir);
    if (!f) this.#folders.set(o.dir, (f = { stores: new Map(), sorted: new Map(), meta: undefined }));
    for (const s of o.stores)
      if (!f.stores.has(s)) {
        f.stores.set(s, new Map());
        f.sorted.set(s, newIndex());
      }
    this.#open.add(o.dir);
    const store = new MemoryStore(o, f, () => this.#open.delete(o.dir));
    // Everything the runtime calls on a RocksStore, with the same meaning (see the class).
    return store as unknown as RocksStore;
  };

  destroy = async (dir: string): Promise<void> => {
    if (this.#open.has(dir)) throw new StateLockedError(dir, process.pid, 'still open');
    this.#folders.delete(dir);
  };

  /** Deletes every folder under `prefix` (a worker's `state.dir`), as `rm -rf` would. */
  wipe(prefix: string): void {
    for (const dir of [...this.#folders.keys()])
      if (dir === prefix || dir.startsWith(`${prefix}/`)) this.#folders.delete(dir);
  }
}

class MemoryStore {
  readonly dir: string;
  readonly orphanStores: readonly string[];
  readonly #opts: RocksStoreOptions;
  readonly #f: Folder;
  readonly #release: () => void;
  #closed = false;

  constructor(opts: RocksStoreOptions, f: Folder, release: () => void) {
    this.dir = opts.dir;
    this.#opts = opts;
    this.#f = f;
    this.#release = release;
    this.orphanStores = [...f.stores.keys()].filter((s) => !opts.stores.includes(s));
  }

  get stores(): readonly string[] {
    return this.#opts.stores;
  }

  get isOpen(): boolean {
    return !this.#closed;
  }

  #column(store: string): Map<string, Buffer> {
    if (this.#closed) throw new Error(`state folder ${this.dir} is closed`);
    const c = this.#f.stores.get(store);
    if (!c || !this.#opts.stores.includes(store)) throw new Error(`unknown store ${store} in ${this.dir}`);
    return c;
  }

  getSync(store: string, key: Buffer): Buffer | undefined {
    return this.#column(store).get(key.toString('latin1'));
  }

  getManySync(store: string, keys: Buffer[]): Array<Buffer | undefined> {
    const c = this.#column(store);
    return keys.map((k) => c.get(k.toString('latin1')));
  }

  /** Reads now, answers later (RocksDB's reads on the libuv pool answer at some later turn too). */
  async getManyAsync(store: string, keys: Buffer[]): Promise<Array<Buffer | undefined>> {
    return this.getManySync(store, keys);
  }

  #writes = 0;
  get writes(): number {
    return this.#writes;
  }

  async write(ops: readonly WriteOp[], meta?: Buffer): Promise<void> {
    this.writeSync(ops, meta);
  }

  /** One atomic batch: every store is checked before anything is written. */
  writeSync(ops: readonly WriteOp[], meta?: Buffer): void {
    for (const op of ops) this.#column(op.store);
    if (this.#closed) throw new Error(`state folder ${this.dir} is closed`);
    this.#writes++;
    for (const op of ops) {
      const c = this.#f.stores.get(op.store)!;
      const ix = this.#f.sorted.get(op.store)!;
      const k = op.key.toString('latin1');
      if (op.value === null) {
        if (c.delete(k)) ix.removed++;
      } else {
        if (!c.has(k)) ix.added.push(k);
        c.set(k, Buffer.from(op.value));
      }
    }
    if (meta !== undefined) this.#f.meta = Buffer.from(meta);
  }

  readMeta(): Buffer | undefined {
    if (this.#closed) throw new Error(`state folder ${this.dir} is closed`);
    return this.#f.meta;
  }

  /** Keys compare as latin1 strings, which is RocksDB's unsigned byte order. */
  scanSync(store: string, opts: ScanOptions = {}): Array<[Buffer, Buffer]> {
    const c = this.#column(store);
    const sorted = current(this.#f.sorted.get(store)!, c);
    let lo = 0;
    let hi = sorted.length;
    if (opts.gte !== undefined) lo = Math.max(lo, lowerBound(sorted, opts.gte.toString('latin1')));
    if (opts.gt !== undefined) lo = Math.max(lo, lowerBound(sorted, opts.gt.toString('latin1'), true));
    if (opts.lt !== undefined) hi = Math.min(hi, lowerBound(sorted, opts.lt.toString('latin1')));
    if (opts.lte !== undefined) hi = Math.min(hi, lowerBound(sorted, opts.lte.toString('latin1'), true));
    if (opts.limit !== undefined && opts.limit >= 0 && hi - lo > opts.limit) {
      if (opts.reverse) lo = hi - opts.limit;
      else hi = lo + opts.limit;
    }
    const keys = lo < hi ? sorted.slice(lo, hi) : [];
    if (opts.reverse) keys.reverse();
    const n = keys.length;
    const out = new Array<[Buffer, Buffer]>(n);
    for (let i = 0; i < n; i++) out[i] = [Buffer.from(keys[i]!, 'latin1'), c.get(keys[i]!)!];
    return out;
  }

  async clear(store: string): Promise<void> {
    this.#column(store).clear();
    this.#writes++;
    this.#f.sorted.set(store, newIndex());
  }

  async wipeAll(): Promise<void> {
    this.#writes++;
    for (const c of this.#f.stores.values()) c.clear();
    for (const k of this.#f.sorted.keys()) this.#f.sorted.set(k, newIndex());
    this.#f.meta = undefined;
  }

  approximateSize(): number {
    let n = 0;
    for (const c of this.#f.stores.values()) for (const [k, v] of c) n += k.length + v.length;
    return n;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#release();
  }
}
