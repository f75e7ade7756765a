import { TaskCorruptedError } from '../errors.js';
import type { WrittenOffsets } from '../kafka/producer.js';
import { appendTo } from '../kafka/record-batch.js';
import type { OutRecord } from '../kafka/types.js';
import {
  type ChangelogRecordView,
  type CheckpointMeta,
  encodeCheckpointMeta,
  fingerprintOf,
} from '../state/checkpoint-meta.js';
import type { RocksStore, WriteOp } from '../state/rocks-store.js';
import { type Loaded, WriteBackCache } from '../state/write-back-cache.js';
import type { GraphNode } from '../topology/nodes.js';
import { readCollection } from './collection-state.js';
import type { Collector } from './collector.js';
import { createProcessOp } from './keyed-process.js';
import type { Op } from './operators.js';
import type { MutableRecordContext } from './record-context.js';
import {
  approxSize,
  changelogBound,
  type KeyedState,
  type StateContext,
  type StoreInfo,
  stateValueBytes,
  type TaskState,
  type TimerGuard,
  type TimerSource,
} from './task-state.js';
import { FLUSH_BATCH_OPS, flushedMeta, storedMeta, WriteBehind } from './write-behind.js';

export type { StateContext, StoreInfo } from './task-state.js';

/**
 * How often a task re-reads the size of its RocksDB folder (a readdir and a stat per file): at
 * most every 5 s, at a checkpoint, rather than at each of the ten checkpoints a second.
 */
const STORE_SIZE_REFRESH_MS = 5000;

/**
 * A task's keyed state: RocksDB (one column family per store) behind a write-back cache of
 * decoded values, with one compacted changelog partition per store as the source of truth.
 */
export class RocksTaskState implements TaskState {
  readonly rocks: RocksStore;
  readonly cache: WriteBackCache<unknown>;
  readonly stores: ReadonlyMap<string, StoreInfo>;
  /** The changelog offsets (and last records) of the last committed checkpoint, per store. */
  #meta: CheckpointMeta;
  /** The meta entry RocksDB holds: value stores' offsets lag {@link #meta} while writes wait. */
  #stored: CheckpointMeta;
  /** Committed writes of value stores that RocksDB has not taken yet (write-behind.ts). */
  readonly #behind: WriteBehind;
  /** The stores whose committed writes may wait: value stores, which are read by key only. */
  readonly #deferrable = new Set<string>();
  #pendingOps: WriteOp[] = [];
  /**
   * Store → the last changelog record of the pending checkpoint (its fingerprint once written)
   * and how many records the checkpoint sends to the store's changelog.
   */
  #pendingLast = new Map<string, Omit<ChangelogRecordView, 'offset'> & { count: number }>();
  #writes = 0;
  #sizeAt = 0;
  readonly #ctx: StateContext;
  readonly #taskId: string;
  readonly #partition: number;

  constructor(
    rocks: RocksStore,
    stores: Map<string, StoreInfo>,
    meta: CheckpointMeta,
    ctx: StateContext,
    task: { id: string; partition: number },
  ) {
    this.rocks = rocks;
    this.stores = stores;
    this.#meta = meta;
    this.#stored = meta;
    this.#behind = new WriteBehind(ctx.config.state.localCheckpointRecords, () => this.cache.bound / 4);
    this.#ctx = ctx;
    this.#taskId = task.id;
    this.#partition = task.partition;
    // Map and list stores: an entry's group is its record key's prefix (see collection-state.ts).
    const collections = new Set<string>();
    for (const [name, info] of stores) {
      if (info.spec.descriptor.kind !== 'value') collections.add(name);
      // Timers and an async stage's records in flight are scanned from RocksDB (`__` states).
      else if (!info.spec.stateName.startsWith('__')) this.#deferrable.add(name);
    }
    this.cache = new WriteBackCache<unknown>({
      maxBytes: ctx.cacheBytes ?? ctx.config.state.cacheMaxBytes,
      groupOf: (store, key) => (collections.has(store) && key.length >= 4 ? 4 + key.readUInt32BE(0) : 0),
      loader: (store, key, k) => this.#decode(store, key, this.#committed(store, key, k)),
    });
  }

  /** The committed value of `key` (`k`: as latin1, if known): a write waiting for RocksDB, else RocksDB's. */
  #committed(store: string, key: Buffer, k?: string): Buffer | undefined {
    const v = this.#behind.get(store, key, k);
    return v === undefined ? this.rocks.getSync(store, key) : (v ?? undefined);
  }

  /** Committed writes of `store` that RocksDB has not taken yet (the test driver's state views). */
  unwritten(store: string): Iterable<WriteOp> {
    return this.#behind.of(store);
  }

  #decode(store: string, key: Buffer, raw: Buffer | undefined): Loaded<unknown> {
    if (raw === undefined) return { value: undefined, size: 64 + key.length };
    const value = this.stores.get(store)!.serde.deserialize(raw);
    return { value, size: approxSize(key, value) };
  }

  /** Cache hits and misses when {@link readAhead} last looked. */
  #aheadHits = 0;
  #aheadMisses = 0;
  #aheadSkip = false;

  /**
   * Reads the keys of `stores` (value stores keyed by the record key) into the cache ahead of the
   * records that read them: one MultiGet per store, on this thread for the keys not cached
   * (`background` false: needed now) or on the libuv pool for all (the cache keeps what it holds),
   * taken only if no write reached RocksDB meanwhile (a checkpoint may have written a newer value
   * and the cache evicted it). Skipped while fewer than 1 in 16 of the last 256+ reads missed.
   */
  readAhead(stores: readonly string[], keys: Buffer[], background: boolean): void {
    const c = this.cache;
    const hits = c.hits - this.#aheadHits;
    const misses = c.misses - this.#aheadMisses;
    // Decided again after every 256 reads, not per call: a batch's two calls come back to back.
    if (hits + misses >= 256) {
      this.#aheadHits = c.hits;
      this.#aheadMisses = c.misses;
      this.#aheadSkip = misses * 16 < hits + misses;
    }
    if (this.#aheadSkip) return;
    // Each key's cache string once, for every store and every map it is looked up in.
    const ks = new Array<string>(keys.length);
    for (let i = 0; i < keys.length; i++) ks[i] = keys[i]!.toString('latin1');
    for (const store of stores) {
      // On this thread only the keys not cached are read; on the pool all (fill skips cached ones).
      let [wanted, wantedKs] = [keys, ks];
      if (!background) {
        [wanted, wantedKs] = [[], []];
        for (let i = 0; i < keys.length; i++) {
          if (c.has(store, keys[i]!, ks[i])) continue;
          wanted.push(keys[i]!);
          wantedKs.push(ks[i]!);
        }
        if (wanted.length === 0) continue;
        this.#fill(store, wanted, wantedKs, this.rocks.getManySync(store, wanted));
        continue;
      }
      const { rocks } = this;
      const at = rocks.writes;
      rocks.getManyAsync(store, wanted).then(
        (raws) => {
          if (rocks.isOpen && rocks.writes === at) this.#fill(store, wanted, wantedKs, raws);
        },
        // Only a hint: the records read their keys themselves, and report what fails then.
        () => {},
      );
    }
  }

  /** Caches what a read-ahead found; a value that fails to decode is left for its record's own read. */
  #fill(
    store: string,
    keys: readonly Buffer[],
    ks: readonly string[],
    raws: ReadonlyArray<Buffer | undefined>,
  ): void {
    const load = (i: number) => {
      try {
        const v = this.#behind.get(store, keys[i]!, ks[i]);
        return this.#decode(store, keys[i]!, v === undefined ? raws[i] : (v ?? undefined));
      } catch {
        return undefined;
      }
    };
    this.cache.fill(store, keys, load, ks);
  }

  get dirty(): boolean {
    return this.#writes > 0;
  }

  /** What state handles, timers and async stages are built on: this. */
  get keyed(): KeyedState {
    return this;
  }

  resizeCache(maxBytes: number): void {
    this.cache.resize(maxBytes);
  }

  readonly #timers: TimerSource[] = [];
  registerTimers(t: TimerSource): void {
    this.#timers.push(t);
  }

  /** Fires due timers: event-time ones up to the watermark, processing-time ones up to now. */
  advanceTime(watermark: number | undefined, now: number | undefined, guard?: TimerGuard): number {
    let n = 0;
    for (const t of this.#timers) {
      if (watermark !== undefined) n += t.fire('event', watermark, guard);
      if (now !== undefined) n += t.fire('processing', now, guard);
    }
    return n;
  }

  /** Marks a write (the cache tracks which keys; this tracks that there is something to do). */
  noteWrite(): void {
    this.#writes++;
  }

  processOp(node: GraphNode, downstream: Op, rc: MutableRecordContext, _collector: Collector, late?: Op): Op {
    return createProcessOp(node, downstream, rc, this, late);
  }

  /** Writes counted when the pending checkpoint took its snapshot. */
  #snapshotWrites = 0;

  writeChangelog(out: Map<string, OutRecord[]>, partition: number, batched = false): void {
    // Snapshots first (an async stage writes the records it holds): their writes are this checkpoint's.
    for (const t of this.#timers) t.snapshot?.();
    this.#snapshotWrites = this.#writes;
    if (this.#writes === 0) return;
    const dirty = this.cache.dirty();
    // The snapshot's entries are fresh objects, ours: each becomes its write op (value serialized).
    const ops = dirty as unknown as WriteOp[];
    // An explicit timestamp (CreateTime), so that the fingerprint of the last record is known.
    const now = Date.now();
    const timestamp = now.toString();
    for (let i = 0; i < dirty.length; i++) {
      const e = dirty[i]!;
      const info = this.stores.get(e.store)!;
      const bytes = e.value === undefined ? null : stateValueBytes(info.serde, e.value, e.store);
      ops[i]!.value = bytes;
      const cap = changelogBound(e.store, info.changelog, e.key, bytes, this.#ctx.client.recordLimits);
      let list = out.get(info.changelog);
      if (!list) out.set(info.changelog, (list = []));
      if (batched) appendTo(list, list[list.length - 1]?.batch, partition, e.key, bytes, now, undefined, cap);
      else list.push({ key: e.key, value: bytes, partition, timestamp });
      // Sends keep each topic's order, so the last pushed gets the highest offset.
      let last = this.#pendingLast.get(e.store);
      if (!last) this.#pendingLast.set(e.store, (last = { key: e.key, value: bytes, timestamp, count: 0 }));
      last.key = e.key;
      last.value = bytes;
      last.count++;
    }
    this.#pendingOps = ops;
  }

  /**
   * Writes the checkpoint's RocksDB batch with its meta entry, after Kafka took the changelog
   * records. @throws TaskCorruptedError when a changelog took the records at an offset below the
   * one stored: it was deleted and recreated while the task ran (the task resets, and recovery
   * rebuilds the state from what the new changelog holds).
   */
  async commitLocal(written: WrittenOffsets): Promise<void> {
    const changelogOffsets = { ...this.#meta.changelogOffsets };
    const changelogLast = { ...this.#meta.changelogLast };
    for (const [store, rec] of this.#pendingLast) {
      const info = this.stores.get(store)!;
      const last = written.get(`${info.changelog}:${this.#partition}`);
      if (last === undefined) continue;
      // Where this checkpoint's first changelog record landed: never below the stored offset in
      // the changelog the folder was built from.
      const first = last - BigInt(rec.count - 1);
      const before = changelogOffsets[store];
      if (before !== undefined && first < BigInt(before)) {
        throw new TaskCorruptedError(
          this.#taskId,
          `changelog ${info.changelog} took this checkpoint's records from offset ${first}, below the stored ${before}: it was deleted and recreated`,
        );
      }
      changelogOffsets[store] = (last + 1n).toString();
      changelogLast[store] = fingerprintOf({ ...rec, offset: last });
    }
    const meta: CheckpointMeta = {
      version: 1,
      changelogOffsets,
      changelogLast,
      writtenAt: Date.now(),
    };
    this.#writeLocal(meta);
    this.#meta = meta;
    this.cache.markClean();
    for (const t of this.#timers) t.committed?.();
    this.#pendingOps = [];
    this.#pendingLast.clear();
    // Writes made while the commit was in flight stay dirty (the cache keeps them) and pending.
    this.#writes -= this.#snapshotWrites;
    this.#snapshotWrites = 0;
    this.#ctx.metrics.cacheBytes.set({ app: this.#ctx.appId, task: this.#taskId }, this.cache.bytes);
    if (Date.now() - this.#sizeAt >= STORE_SIZE_REFRESH_MS) this.refreshStoreSize();
  }

  /**
   * The RocksDB batch: value stores' writes wait until enough went by (write-behind.ts), others' go
   * now. A flush of more than {@link FLUSH_BATCH_OPS} keys goes in steps to the writer thread, then
   * the meta.
   */
  #writeLocal(meta: CheckpointMeta): void {
    const b = this.#behind;
    if (b.failed !== undefined) throw b.failed;
    const now: WriteOp[] = [];
    const later: WriteOp[] = [];
    for (const op of this.#pendingOps) (this.#deferrable.has(op.store) ? later : now).push(op);
    b.add(later);
    if (b.due && !b.flushing && (b.maxRecords === 0 || b.size <= FLUSH_BATCH_OPS)) {
      for (const op of b.all()) now.push(op);
      this.rocks.writeSync(now, encodeCheckpointMeta(meta));
      b.clear();
      this.#stored = meta;
      return;
    }
    if (b.due)
      b.flush(FLUSH_BATCH_OPS, {
        write: (ops) => this.rocks.isOpen && this.rocks.writeOffThread(ops),
        done: () => {
          const stored = flushedMeta(this.#stored, meta, this.#deferrable);
          this.rocks.writeSync([], encodeCheckpointMeta(stored));
          this.#stored = stored;
        },
      });
    if (this.#pendingLast.size === 0) return; // nothing went to a changelog: nothing to write
    const stored = storedMeta(this.#stored, meta, [...this.#pendingLast.keys()], this.#deferrable);
    this.rocks.writeSync(now, encodeCheckpointMeta(stored));
    this.#stored = stored;
  }

  /** Writes what waits for RocksDB (a clean close hands over a folder that needs no replay). */
  #writeBehind(): void {
    if (this.#behind.size === 0 || !this.rocks.isOpen) return;
    try {
      this.rocks.writeSync(this.#behind.all(), encodeCheckpointMeta(this.#meta));
    } catch (err) {
      // They are committed in the changelogs: the next owner replays them.
      this.#ctx.logger.warn({ err, task: this.#taskId }, 'cannot write committed state at close');
    }
    this.#behind.clear();
  }

  /** Sets `sluice_state_store_bytes` of this task from the files of its RocksDB folder. */
  refreshStoreSize(): void {
    this.#sizeAt = Date.now();
    try {
      this.#ctx.metrics.stateStoreBytes.set(
        { app: this.#ctx.appId, task: this.#taskId },
        this.rocks.approximateSize(),
      );
    } catch (e) {
      // A metric must not fail a checkpoint that has committed; the next refresh tries again.
      this.#ctx.logger.debug({ err: e }, 'cannot read the state folder size');
    }
  }

  /** Cache counters since the last call, for the worker's metrics. */
  #lastHits = 0;
  #lastMisses = 0;
  flushCacheMetrics(): void {
    const m = this.#ctx.metrics;
    m.cacheHits.inc({ app: this.#ctx.appId }, this.cache.hits - this.#lastHits);
    m.cacheMisses.inc({ app: this.#ctx.appId }, this.cache.misses - this.#lastMisses);
    this.#lastHits = this.cache.hits;
    this.#lastMisses = this.cache.misses;
  }

  async close(opts: { clean?: boolean } = {}): Promise<void> {
    this.flushCacheMetrics();
    for (const g of [this.#ctx.metrics.stateStoreBytes, this.#ctx.metrics.cacheBytes])
      g.remove({ app: this.#ctx.appId, task: this.#taskId });
    // A reset or a fenced task leaves what waits to the changelogs: no more of a flush is sent.
    if (!opts.clean) this.#behind.clear();
    // A flush in flight lands first: the writes that waited behind it are newer.
    await this.#behind.settled();
    if (opts.clean) this.#writeBehind();
    this.cache.clear();
    await this.rocks.close();
  }

  read(store: string, key: Buffer): unknown {
    const info = this.stores.get(store);
    if (!info) return undefined;
    const d = info.spec.descriptor;
    const keySerde = d.kind === 'map' ? d.keySerde : undefined;
    if (d.kind !== 'value')
      return readCollection(this.rocks, this.cache, store, d.kind, keySerde, d.serde, key);
    const cached = this.cache.peek(store, key);
    if (cached) return cached.value;
    const raw = this.#committed(store, key);
    return raw === undefined ? undefined : info.serde.deserialize(raw);
  }

  get taskId(): string {
    return this.#taskId;
  }
}
