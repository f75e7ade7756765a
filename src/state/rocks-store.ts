import { readdirSync, statSync } from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { acquireDirLock, type DirLock, LOCK_FILE } from './dir-lock.js';
import { StateIoError, toStateError } from './errors.js';
import {
  type ColumnFamilyOptions,
  type ColumnOption,
  createRawDb,
  type RawDb,
  type RawRange,
  unwrapRawError,
} from './rocks-binding.js';
import { writeOffThread, writerUsable } from './rocks-writer.js';
import type { LatinOps } from './rocks-writer-format.js';

/** The internal column family holding the checkpoint meta entry. */
export const META_STORE = '__meta';
const META_KEY = Buffer.from('checkpoint');

/** Store names become column family names and changelog topic names (`<appId>-<store>-changelog`). */
const STORE_NAME = /^[A-Za-z0-9._-]{1,200}$/;

/**
 * Write durability: `sync: false`, the RocksDB default. A write reaches the WAL in the page cache
 * before `write()` returns, so it survives a crash of the process; an OS crash or power loss can
 * lose the last writes. That is safe here because local state is a cache of the changelog topics,
 * which are the source of truth: each batch is one WAL record (a checksummed unit that recovery
 * replays whole or not at all), so the meta entry and the data it describes are lost together,
 * and recovery then replays the changelogs from the older offsets the surviving meta names.
 * `close()` syncs the WAL, so a clean shutdown loses nothing.
 */
const WRITE_OPTIONS = { sync: false } as const;

/** Rows per `nextv` of an async scan: large enough to amortize the hop to the libuv pool. */
const SCAN_BATCH = 1000;

/**
 * Per-store RocksDB tuning. Each task has its own database and each store its own column family,
 * so these multiply by tasks × stores on a worker; the defaults keep a store small.
 */
export interface RocksTuning {
  /**
   * Block cache per store (bytes). 8 MiB (the binding's default): the write-back cache in front
   * holds the hot keys, so this mostly caches index and filter blocks.
   */
  blockCacheBytes?: number;
  /**
   * Memtable budget per store (bytes). 32 MiB: level compaction with write buffers of a quarter
   * of it (8 MiB), at most 6 of them. RocksDB's default (64 MiB buffers) would let one busy task
   * hold 128 MiB per store before flushing.
   */
  memtableBudgetBytes?: number;
}

export interface RocksStoreOptions {
  /** The task's folder, `<stateDir>/<appId>/<taskId>/`; created if missing. */
  dir: string;
  /** Store names; one column family each. Stores added since the folder was created are created. */
  stores: readonly string[];
  /** Names the task in corruption errors. */
  taskId?: string;
  tuning?: RocksTuning;
}

export interface WriteOp {
  store: string;
  key: Buffer;
  /** `null` deletes the key. */
  value: Buffer | null;
}

/** An op from latin1 strings (one char per byte; `null` deletes), as the write-behind keeps them. */
export function latinOp(store: string, k: string, v: string | null): WriteOp {
  return { store, key: Buffer.from(k, 'latin1'), value: v === null ? null : Buffer.from(v, 'latin1') };
}

export interface ScanOptions {
  gte?: Buffer;
  gt?: Buffer;
  lt?: Buffer;
  lte?: Buffer;
  reverse?: boolean;
  /** At most this many rows. */
  limit?: number;
}

/**
 * One RocksDB instance per task folder: a column family per named store, plus `__meta` holding the
 * checkpoint entry. Reads are synchronous (the write-back cache calls them on a miss); writes are
 * single atomic batches. The folder is locked for the lifetime of the instance.
 *
 * @example
 * const db = await RocksStore.open({ dir: '/var/lib/sluice/app/0_3', stores: ['counts'] });
 * await db.write([{ store: 'counts', key, value }], encodeCheckpointMeta(meta));
 * db.getSync('counts', key); // => Buffer
 * await db.close();
 */
export class RocksStore {
  readonly dir: string;
  /** Column families found on disk that no configured store uses (left untouched). */
  readonly orphanStores: readonly string[];

  private db: RawDb;
  private columns: Map<string, ColumnOption>;
  private metaColumn: ColumnOption;
  private readonly lock: DirLock;
  private readonly opts: RocksStoreOptions;
  private closed = false;
  /** Writes so far (batches and clears): a read that overlapped one may be stale. */
  private writeCount = 0;
  /** Reused one-key array for getSync: the binding reads it synchronously. */
  private readonly one: Buffer[] = [META_KEY];

  private constructor(opts: RocksStoreOptions, lock: DirLock, opened: Opened) {
    this.dir = opts.dir;
    this.opts = opts;
    this.lock = lock;
    this.db = opened.db;
    this.columns = opened.columns;
    this.metaColumn = opened.meta;
    this.orphanStores = opened.orphans;
  }

  /**
   * Creates the folder if needed, locks it and opens the database.
   *
   * @throws StateLockedError when another live process (or this one) holds the folder.
   * @throws StateIoError on I/O errors (`diskFull` set when the disk is full).
   * @throws TaskCorruptedError when RocksDB finds corruption: wipe with {@link RocksStore.destroy}.
   */
  static async open(opts: RocksStoreOptions): Promise<RocksStore> {
    validateStores(opts.stores);
    try {
      await mkdir(opts.dir, { recursive: true });
    } catch (err) {
      throw toStateError(err, opts.dir, 'open', opts.taskId);
    }
    const lock = await acquireDirLock(opts.dir);
    try {
      return new RocksStore(opts, lock, await openDb(opts));
    } catch (err) {
      lock.release();
      throw toStateError(err, opts.dir, 'open', opts.taskId);
    }
  }

  /**
   * Deletes a task's folder and everything in it. Takes the lock first, so it refuses a folder
   * that a live process (or an open store in this process) holds; close the store before.
   */
  static async destroy(dir: string): Promise<void> {
    try {
      await mkdir(dir, { recursive: true });
    } catch (err) {
      throw toStateError(err, dir, 'destroy');
    }
    const lock = await acquireDirLock(dir);
    try {
      await rm(dir, { recursive: true, force: true });
    } catch (err) {
      throw toStateError(err, dir, 'destroy');
    } finally {
      lock.release();
    }
  }

  /** The configured store names. */
  get stores(): readonly string[] {
    return this.opts.stores;
  }

  get isOpen(): boolean {
    return !this.closed;
  }

  /** Synchronous point read; `undefined` when the key is absent. */
  getSync(store: string, key: Buffer): Buffer | undefined {
    const column = this.column(store);
    this.assertOpen('read');
    const one = this.one;
    one[0] = key;
    let value: Buffer | null | undefined;
    try {
      value = this.db._getManySync(one, column)[0];
    } catch (err) {
      throw toStateError(err, this.dir, 'read', this.opts.taskId);
    } finally {
      one[0] = META_KEY;
    }
    if (value === null) throw new StateIoError(this.dir, 'read', `read in ${this.dir} timed out or aborted`);
    return value;
  }

  /** Synchronous multi-key read (one RocksDB MultiGet); `undefined` for absent keys. */
  getManySync(store: string, keys: Buffer[]): Array<Buffer | undefined> {
    const column = this.column(store);
    this.assertOpen('read');
    let values: Array<Buffer | null | undefined>;
    try {
      values = this.db._getManySync(keys, column);
    } catch (err) {
      throw toStateError(err, this.dir, 'read', this.opts.taskId);
    }
    return this.found(values);
  }

  /**
   * {@link getManySync} on the libuv pool, off the calling thread. The values are as of some
   * moment before the promise settles: compare {@link writes} before and after to know that no
   * write of this store came in between.
   */
  async getManyAsync(store: string, keys: Buffer[]): Promise<Array<Buffer | undefined>> {
    const column = this.column(store);
    this.assertOpen('read');
    let values: Array<Buffer | null | undefined>;
    try {
      values = await this.db._getManyAsync(keys, column);
    } catch (err) {
      throw toStateError(err, this.dir, 'read', this.opts.taskId);
    }
    return this.found(values);
  }

  /** A MultiGet's answer: `null` (only with a read timeout, which we do not set) is an error. */
  private found(values: Array<Buffer | null | undefined>): Array<Buffer | undefined> {
    for (let i = 0; i < values.length; i++) {
      if (values[i] === null)
        throw new StateIoError(this.dir, 'read', `read in ${this.dir} timed out or aborted`);
    }
    return values as Array<Buffer | undefined>;
  }

  /** How many writes (batches, clears) this store has taken: changes when anything may have. */
  get writes(): number {
    return this.writeCount;
  }

  /**
   * Writes the operations, and the checkpoint meta entry when given, as one atomic batch: after a
   * crash either all of it is there or none. An unknown store rejects before anything is written.
   */
  async write(ops: readonly WriteOp[], meta?: Buffer): Promise<void> {
    this.writeSync(ops, meta);
  }

  /**
   * Writes `ops` as one atomic batch on the RocksDB writer thread (rocks-writer.ts), in the order
   * sent; reads see them once it settles. {@link close} waits for every batch in flight. Where
   * the thread could not start, writes them at once on this thread.
   */
  writeOffThread(ops: LatinOps): Promise<void> {
    this.assertOpen('write');
    // An unknown store throws before anything is sent, as in writeSync.
    for (let i = 0, last = ''; i < ops.stores.length; i++)
      if (ops.stores[i] !== last) this.column((last = ops.stores[i]!));
    if (!writerUsable()) {
      this.writeSync(ops.keys.map((k, i) => latinOp(ops.stores[i]!, k, ops.values[i]!)));
      return Promise.resolve();
    }
    this.writeCount++;
    const p = writeOffThread(this.db.handle, ops).finally(() => {
      // A read that overlapped the write may have seen the database before it.
      this.writeCount++;
      this.inFlight.delete(p);
    });
    this.inFlight.add(p);
    return p.catch((err) => {
      throw toStateError(err, this.dir, 'write', this.opts.taskId);
    });
  }

  /** Batches on the writer thread: the database stays open until they are answered. */
  private readonly inFlight = new Set<Promise<void>>();

  private async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  /** {@link write}, on the calling thread (the binding writes synchronously either way). */
  writeSync(ops: readonly WriteOp[], meta?: Buffer): void {
    this.assertOpen('write');
    if (ops.length === 0 && meta === undefined) return;
    this.writeCount++;
    const batch = this.db.batch();
    try {
      for (let i = 0; i < ops.length; i++) {
        const op = ops[i];
        const column = this.column(op.store);
        if (op.value === null) batch._del(op.key, column);
        else batch._put(op.key, op.value, column);
      }
      if (meta !== undefined) batch._put(META_KEY, meta, this.metaColumn);
      batch._writeSync(WRITE_OPTIONS);
    } catch (err) {
      throw toStateError(err, this.dir, 'write', this.opts.taskId);
    } finally {
      batch._closeSync();
    }
  }

  /** The checkpoint meta entry, or `undefined` for a new folder. */
  readMeta(): Buffer | undefined {
    this.assertOpen('read');
    const one = this.one;
    one[0] = META_KEY;
    try {
      return this.db._getManySync(one, this.metaColumn)[0] ?? undefined;
    } catch (err) {
      throw toStateError(err, this.dir, 'read', this.opts.taskId);
    }
  }

  /**
   * Ordered scan of a store (by unsigned byte order of the keys), read in batches on the libuv
   * pool. Breaking out of the loop closes the iterator; closing the store ends the scan with a
   * StateIoError.
   */
  async *iterate(store: string, opts: ScanOptions = {}): AsyncGenerator<[Buffer, Buffer], void, undefined> {
    const column = this.column(store);
    this.assertOpen('scan');
    let it: ReturnType<RawDb['iterator']>;
    try {
      it = this.db.iterator(rangeOf(column, opts));
    } catch (err) {
      throw toStateError(err, this.dir, 'scan', this.opts.taskId);
    }
    try {
      for (;;) {
        let rows: Array<[Buffer, Buffer]>;
        try {
          rows = await it.nextv(SCAN_BATCH);
        } catch (err) {
          if (this.closed)
            throw new StateIoError(this.dir, 'scan', `state store ${this.dir} closed during a scan`);
          throw toStateError(err, this.dir, 'scan', this.opts.taskId);
        }
        if (rows.length === 0) return;
        yield* rows;
      }
    } finally {
      await it.close().catch(() => {});
    }
  }

  /**
   * Synchronous ordered scan on the calling thread, for bounded reads on the hot path (the
   * entries of one key's map state, the windows of one key). Bound it with a range or `limit`.
   */
  scanSync(store: string, opts: ScanOptions = {}): Array<[Buffer, Buffer]> {
    const column = this.column(store);
    this.assertOpen('scan');
    let rows: Buffer[];
    try {
      rows = this.db.querySync(rangeOf(column, opts)).rows;
    } catch (err) {
      throw toStateError(err, this.dir, 'scan', this.opts.taskId);
    }
    const out = new Array<[Buffer, Buffer]>(rows.length >> 1);
    for (let i = 0; i < out.length; i++) out[i] = [rows[2 * i], rows[2 * i + 1]];
    return out;
  }

  /** Deletes every key of one store (a range delete; not atomic with other writes). */
  async clear(store: string): Promise<void> {
    const column = this.column(store);
    this.assertOpen('clear');
    this.writeCount++;
    try {
      await this.db.clear(column);
    } catch (err) {
      throw toStateError(err, this.dir, 'clear', this.opts.taskId);
    }
  }

  /**
   * Wipes all stores and the meta entry by recreating the database, keeping the folder locked.
   * For a task whose changelog was recreated: wipe, then restore from the changelogs.
   */
  async wipeAll(): Promise<void> {
    this.assertOpen('wipe');
    this.writeCount++;
    await this.settled();
    try {
      await this.db.close();
    } catch {
      // A database in a failed state may refuse a clean close; its files go anyway.
    }
    try {
      for (const name of await readdir(this.dir)) {
        if (name !== LOCK_FILE) await rm(join(this.dir, name), { recursive: true, force: true });
      }
      const opened = await openDb(this.opts);
      this.db = opened.db;
      this.columns = opened.columns;
      this.metaColumn = opened.meta;
    } catch (err) {
      this.closed = true;
      this.lock.release();
      throw toStateError(err, this.dir, 'wipe', this.opts.taskId);
    }
  }

  /**
   * Bytes the database occupies on disk (SST files, WAL, manifest). The binding reads properties
   * of the default column family only, so there is no per-store figure.
   */
  approximateSize(): number {
    let total = 0;
    try {
      for (const name of readdirSync(this.dir)) {
        if (name === LOCK_FILE) continue;
        const st = statSync(join(this.dir, name), { throwIfNoEntry: false });
        if (st?.isFile()) total += st.size;
      }
    } catch (err) {
      throw toStateError(err, this.dir, 'stat', this.opts.taskId);
    }
    return total;
  }

  /**
   * Closes the database (syncing its WAL) and releases the folder. Idempotent. Reads and writes
   * fail with StateIoError from the moment it is called. The lock is released even when RocksDB
   * reports an error on close (its own LOCK is released too).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.settled();
      await this.db.close();
    } catch (err) {
      throw toStateError(err, this.dir, 'close', this.opts.taskId);
    } finally {
      this.lock.release();
    }
  }

  private column(store: string): ColumnOption {
    const column = this.columns.get(store);
    if (column === undefined) {
      throw new Error(
        `unknown state store "${store}" in ${this.dir} (open with stores: ${this.opts.stores.join(', ')})`,
      );
    }
    return column;
  }

  private assertOpen(op: string): void {
    // The binding dereferences a closed database and crashes the process: refuse first. The
    // status is 'closing' from the moment close() is called (here or in wipeAll).
    if (this.closed || this.db.status !== 'open') {
      throw new StateIoError(
        this.dir,
        op,
        `state store ${this.dir} is ${this.closed ? 'closed' : 'being wiped'}`,
      );
    }
  }
}

interface Opened {
  db: RawDb;
  columns: Map<string, ColumnOption>;
  meta: ColumnOption;
  orphans: string[];
}

const NOT_OPENED = /Column families not opened: (.+)$/;

async function openDb(opts: RocksStoreOptions): Promise<Opened> {
  const storeOptions: ColumnFamilyOptions = {
    cacheSize: opts.tuning?.blockCacheBytes ?? 8 * 1024 * 1024,
    memtableMemoryBudget: opts.tuning?.memtableBudgetBytes ?? 32 * 1024 * 1024,
    compaction: 'level',
    optimize: 'point-lookup',
  };
  // Families nobody reads through: no block cache, small memtables.
  const quiet: ColumnFamilyOptions = {
    cacheSize: 0,
    memtableMemoryBudget: 4 * 1024 * 1024,
    compaction: 'level',
  };
  const columns: Record<string, ColumnFamilyOptions> = { default: quiet, [META_STORE]: quiet };
  for (const store of opts.stores) columns[store] = storeOptions;
  const orphans: string[] = [];
  // RocksDB refuses to open without every family on disk, and the binding cannot list them:
  // learn the missing ones from the error and open again with them.
  for (let attempt = 0; ; attempt++) {
    const db = createRawDb(opts.dir);
    try {
      await db.open({ ...quiet, columns });
    } catch (err) {
      const match = NOT_OPENED.exec(unwrapRawError(err).message);
      if (match === null || attempt > 0) throw err;
      for (const name of match[1].split(', ')) {
        orphans.push(name);
        columns[name] = quiet;
      }
      continue;
    }
    const handles = db.columns;
    const map = new Map<string, ColumnOption>();
    for (const store of opts.stores) map.set(store, { column: handles[store] });
    return { db, columns: map, meta: { column: handles[META_STORE] }, orphans };
  }
}

function validateStores(stores: readonly string[]): void {
  const seen = new Set<string>();
  for (const store of stores) {
    if (!STORE_NAME.test(store) || store === 'default' || store.startsWith('__')) {
      throw new Error(
        `invalid state store name "${store}": use 1-200 of [A-Za-z0-9._-], not "default" nor starting with "__"`,
      );
    }
    if (seen.has(store)) throw new Error(`state store "${store}" listed twice`);
    seen.add(store);
  }
}

function rangeOf(
  column: ColumnOption,
  opts: ScanOptions,
): RawRange & { keyEncoding: 'buffer'; valueEncoding: 'buffer' } {
  const range: RawRange & { keyEncoding: 'buffer'; valueEncoding: 'buffer' } = {
    column: column.column,
    keyEncoding: 'buffer',
    valueEncoding: 'buffer',
  };
  if (opts.gte !== undefined) range.gte = opts.gte;
  if (opts.gt !== undefined) range.gt = opts.gt;
  if (opts.lt !== undefined) range.lt = opts.lt;
  if (opts.lte !== undefined) range.lte = opts.lte;
  if (opts.reverse !== undefined) range.reverse = opts.reverse;
  if (opts.limit !== undefined) range.limit = opts.limit;
  return range;
}
