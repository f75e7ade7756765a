/**
 * The one place that loads `@nxtedition/rocksdb`, with types for the part of it we use.
 *
 * The package ships no type declarations and documents little beyond abstract-level, so this
 * surface was established by experiment against 12.2.12 (RocksDB 9.7). Facts that shape
 * {@link RocksStore}:
 *
 * - `new RocksLevel(dir, { keyEncoding: 'buffer', valueEncoding: 'buffer' })`, then
 *   `await db.open({ columns: { default: {}, a: {}, ... } })`. The `default` column family must be
 *   listed or open fails ("Default column family not specified"). Missing families are created
 *   (`create_missing_column_families` is on). Every family that exists on disk must be listed, or
 *   open fails with "Column families not opened: a, b". Open errors arrive wrapped: `err.code` is
 *   `LEVEL_DATABASE_NOT_OPEN` and the RocksDB error is `err.cause` (`LEVEL_LOCKED`,
 *   `LEVEL_IO_ERROR`, `LEVEL_CORRUPTION`, or no code).
 * - After open, `db.columns` maps each family name to an opaque handle (a N-API external), passed
 *   as `{ column }` to reads, batch operations and iterators. Handles belong to one open instance;
 *   a reopened database hands out new ones.
 * - `db._getManySync(keys, { column })` is a synchronous MultiGet on the calling thread:
 *   `Buffer` for a hit, `undefined` for a miss (`null` only with `timeout`, which we do not set).
 *   Calling it after `close()` dereferences a null `DB*` and kills the process with SIGSEGV, so
 *   the caller must refuse reads once it has started closing.
 * - `db._getManyAsync(keys, { column })` is the same MultiGet on the libuv pool, resolving to the
 *   same array; `close()` waits for the ones in flight (the binding counts them).
 * - `db.batch()` returns a chained batch; `_put/_del(key, value, { column })` append to a native
 *   `WriteBatch` and `_writeSync({ sync })` writes it on the calling thread (the public `write()`
 *   does the same and only defers the callback). `_closeSync()` frees it. A batch left open when
 *   the database closes is closed by abstract-level; writing it afterwards throws an assertion.
 * - `db.iterator({ column, gte, lt, reverse, limit })` with `nextv(n)` reads on the libuv pool.
 *   Closing the database closes open iterators first (a later `next()` rejects with
 *   `LEVEL_ITERATOR_NOT_OPEN`) and waits for an in-flight `nextv`; neither crashes.
 * - `db.querySync({ column, gte, lt, limit, keyEncoding: 'buffer', valueEncoding: 'buffer' })`
 *   scans synchronously into `{ rows: [k, v, k, v, ...], finished }`. Without the two encoding
 *   options it throws "Convert(...) failed!" (the native default encoding is invalid).
 * - `db.clear({ column })` is a synchronous `DeleteRange` over the whole family.
 * - `db.getProperty(name)` reads the default column family only; per-family properties such as
 *   `rocksdb.estimate-num-keys.<cf>` return "". There is no per-store size from the binding.
 * - Each family's options carry their own block cache (`cacheSize`, default 8 MiB) and, unless
 *   `compaction` is set, RocksDB's default 64 MiB write buffer; see the tuning in RocksStore.
 * - A failed WAL append (disk full) throws `LEVEL_IO_ERROR` "IO error: No space left on device"
 *   and leaves the instance read-only; `close()` then rejects (cause "Seen error") but releases
 *   RocksDB's LOCK.
 */
import { RocksLevel } from '@nxtedition/rocksdb';

/** An opaque column family handle from {@link RawDb.columns}. */
export type ColumnHandle = { readonly __columnHandle: unique symbol };

/** Options object carrying a column family; allocate once per store and reuse it. */
export interface ColumnOption {
  readonly column: ColumnHandle;
}

/** Options of one column family (a subset of what the binding reads). */
export interface ColumnFamilyOptions {
  /** Block cache bytes for this family; 0 disables the cache. */
  cacheSize?: number;
  /** With `compaction`, sizes write buffers at a quarter of this. */
  memtableMemoryBudget?: number;
  compaction?: 'level' | 'universal';
  compression?: boolean;
  optimize?: 'point-lookup';
}

export interface RawOpenOptions extends ColumnFamilyOptions {
  columns: Record<string, ColumnFamilyOptions>;
  createIfMissing?: boolean;
}

export interface RawRange {
  column: ColumnHandle;
  gt?: Buffer;
  gte?: Buffer;
  lt?: Buffer;
  lte?: Buffer;
  reverse?: boolean;
  limit?: number;
}

export interface RawChainedBatch {
  _put(key: Buffer, value: Buffer, options: ColumnOption): void;
  _del(key: Buffer, options: ColumnOption): void;
  _writeSync(options: { sync: boolean }): void;
  _closeSync(): void;
  readonly length: number;
}

export interface RawIterator {
  nextv(size: number): Promise<Array<[Buffer, Buffer]>>;
  close(): Promise<void>;
}

export interface RawDb {
  readonly status: 'opening' | 'open' | 'closing' | 'closed';
  readonly columns: Record<string, ColumnHandle>;
  /** The native database, for another thread of this process (rocks-writer.ts); open only. */
  readonly handle: bigint;
  open(options: RawOpenOptions): Promise<void>;
  close(): Promise<void>;
  batch(): RawChainedBatch;
  _getManySync(keys: Buffer[], options: ColumnOption): Array<Buffer | undefined | null>;
  /** The same MultiGet on the libuv pool; `close()` waits for one in flight. */
  _getManyAsync(keys: Buffer[], options: ColumnOption): Promise<Array<Buffer | undefined | null>>;
  iterator(options: RawRange & { keyEncoding: 'buffer'; valueEncoding: 'buffer' }): RawIterator;
  querySync(options: RawRange & { keyEncoding: 'buffer'; valueEncoding: 'buffer' }): {
    rows: Buffer[];
    finished: boolean;
  };
  clear(options: { column: ColumnHandle }): Promise<void>;
  getProperty(name: string): string;
}

/** An error as the binding throws it: abstract-level's `code`, RocksDB's status in `message`. */
export interface RawError extends Error {
  code?: string;
  cause?: unknown;
}

/** Creates an unopened database handle whose keys and values are Buffers. */
export function createRawDb(dir: string): RawDb {
  return new RocksLevel(dir, { keyEncoding: 'buffer', valueEncoding: 'buffer' }) as RawDb;
}

/** The RocksDB error inside an abstract-level wrapper (open and close wrap it in `cause`). */
export function unwrapRawError(err: unknown): RawError {
  let e = err as RawError;
  while (
    e !== null &&
    typeof e === 'object' &&
    (e.code === 'LEVEL_DATABASE_NOT_OPEN' || e.code === 'LEVEL_DATABASE_NOT_CLOSED') &&
    e.cause instanceof Error
  ) {
    e = e.cause as RawError;
  }
  return e;
}
