import { join } from 'node:path';
import type { Serde } from '../api/serdes.js';
import type { SluiceConfig } from '../config/schema.js';
import { SluiceError, TaskCorruptedError } from '../errors.js';
import type { KafkaClient } from '../kafka/client.js';
import type { PartitionReader } from '../kafka/partition-reader.js';
import type { WrittenOffsets } from '../kafka/producer.js';
import type { OutRecord } from '../kafka/types.js';
import type { Logger } from '../ops/logger.js';
import type { WorkerMetrics } from '../ops/metrics.js';
import {
  type ChangelogFingerprint,
  type ChangelogRecordView,
  type CheckpointMeta,
  decodeCheckpointMeta,
  encodeCheckpointMeta,
  fingerprintMismatch,
  fingerprintOf,
} from '../state/checkpoint-meta.js';
import { RocksStore, type WriteOp } from '../state/rocks-store.js';
import { WriteBackCache } from '../state/write-back-cache.js';
import { changelogTopic } from '../topology/build.js';
import type { GraphNode, StoreSpec } from '../topology/nodes.js';
import type { Collector } from './collector.js';
import { createProcessOp, mapStoreSerde } from './keyed-process.js';
import type { Op } from './operators.js';
import type { MutableRecordContext } from './record-context.js';
import type { Task } from './task.js';
import type { TaskState } from './task-state.js';
import type { TimerService } from './timers.js';

interface StoreInfo {
  spec: StoreSpec;
  changelog: string;
  serde: Serde<any>;
}

/** How often a running restore logs its progress. */
const RESTORE_REPORT_MS = 5000;
/**
 * How often a task re-reads the size of its RocksDB folder (a readdir and a stat per file): at
 * most every 5 s, at a checkpoint, rather than at each of the ten checkpoints a second.
 */
const STORE_SIZE_REFRESH_MS = 5000;

/**
 * Rough in-memory size of a decoded value, for the cache's memory bound. It must be cheap (it
 * runs on every write); it errs high for small values, which is the safe side.
 */
export function approxSize(key: Buffer, v: unknown): number {
  const base = 96 + key.length;
  if (v === null || v === undefined || typeof v === 'number' || typeof v === 'boolean') return base;
  if (typeof v === 'string') return base + 2 * v.length;
  if (v instanceof Map) return base + 96 * v.size;
  if (Array.isArray(v)) return base + 64 * v.length;
  return base + 256;
}

export interface StateContext {
  client: KafkaClient;
  metrics: WorkerMetrics;
  logger: Logger;
  config: Readonly<SluiceConfig>;
  appId: string;
  /** Bytes of cache this task may use (the worker's bound shared out between its tasks). */
  cacheBytes?: number;
}

/**
 * A task's keyed state: RocksDB (one column family per store) behind a write-back cache of
 * decoded values, with one compacted changelog partition per store as the source of truth.
 */
export class RocksTaskState implements TaskState {
  readonly rocks: RocksStore;
  readonly cache: WriteBackCache<unknown>;
  readonly stores: ReadonlyMap<string, StoreInfo>;
  #meta: CheckpointMeta;
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
    this.#ctx = ctx;
    this.#taskId = task.id;
    this.#partition = task.partition;
    this.cache = new WriteBackCache<unknown>({
      maxBytes: ctx.cacheBytes ?? ctx.config.state.cacheMaxBytes,
      loader: (store, key) => {
        const raw = rocks.getSync(store, key);
        if (raw === undefined) return { value: undefined, size: 64 + key.length };
        const value = stores.get(store)!.serde.deserialize(raw);
        return { value, size: approxSize(key, value) };
      },
    });
  }

  get dirty(): boolean {
    return this.#writes > 0;
  }

  resizeCache(maxBytes: number): void {
    this.cache.resize(maxBytes);
  }

  readonly #timers: TimerService[] = [];
  registerTimers(t: TimerService): void {
    this.#timers.push(t);
  }

  /** Fires due timers: event-time ones up to the watermark, processing-time ones up to now. */
  advanceTime(watermark: number | undefined, now: number | undefined): number {
    let n = 0;
    for (const t of this.#timers) {
      if (watermark !== undefined) n += t.fire('event', watermark);
      if (now !== undefined) n += t.fire('processing', now);
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

  writeChangelog(out: Map<string, OutRecord[]>, partition: number): void {
    this.#snapshotWrites = this.#writes;
    if (this.#writes === 0) return;
    const dirty = this.cache.dirty();
    const ops: WriteOp[] = new Array(dirty.length);
    // An explicit timestamp (CreateTime), so that the fingerprint of the last record is known.
    const timestamp = Date.now().toString();
    for (let i = 0; i < dirty.length; i++) {
      const e = dirty[i]!;
      const info = this.stores.get(e.store)!;
      const bytes = e.value === undefined ? null : info.serde.serialize(e.value);
      ops[i] = { store: e.store, key: e.key, value: bytes };
      let list = out.get(info.changelog);
      if (!list) out.set(info.changelog, (list = []));
      list.push({ key: e.key, value: bytes, partition, timestamp });
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
   * records.
   *
   * @throws TaskCorruptedError when a changelog took the records at an offset below the one
   * stored: it was deleted and recreated while the task ran (the task resets, and recovery
   * rebuilds the state from what the new changelog holds).
   */
  async commitLocal(written: WrittenOffsets, inputOffsets: Record<string, string>): Promise<void> {
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
      inputOffsets: { ...this.#meta.inputOffsets, ...inputOffsets },
      changelogLast,
      writtenAt: Date.now(),
    };
    this.rocks.writeSync(this.#pendingOps, encodeCheckpointMeta(meta));
    this.#meta = meta;
    this.cache.markClean();
    this.#pendingOps = [];
    this.#pendingLast.clear();
    // Writes made while the commit was in flight stay dirty (the cache keeps them) and pending.
    this.#writes -= this.#snapshotWrites;
    this.#snapshotWrites = 0;
    const m = this.#ctx.metrics;
    m.cacheBytes.set({ app: this.#ctx.appId, task: this.#taskId }, this.cache.bytes);
    if (Date.now() - this.#sizeAt >= STORE_SIZE_REFRESH_MS) this.refreshStoreSize();
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

  async close(): Promise<void> {
    this.flushCacheMetrics();
    this.#ctx.metrics.stateStoreBytes.remove({ app: this.#ctx.appId, task: this.#taskId });
    this.cache.clear();
    await this.rocks.close();
  }

  read(store: string, key: Buffer): unknown {
    const info = this.stores.get(store);
    if (!info) return undefined;
    const cached = this.cache.peek(store, key);
    if (cached) return cached.value;
    const raw = this.rocks.getSync(store, key);
    return raw === undefined ? undefined : info.serde.deserialize(raw);
  }

  get taskId(): string {
    return this.#taskId;
  }
}

/** An empty meta entry: a folder that replays every changelog from its start. */
function emptyMeta(): CheckpointMeta {
  return { version: 1, changelogOffsets: {}, inputOffsets: {}, writtenAt: 0 };
}

/** Local state that cannot be trusted: RocksDB's own corruption, or a meta entry that does not decode. */
function isCorrupted(e: unknown): boolean {
  return e instanceof SluiceError && e.code === 'SLUICE_TASK_CORRUPTED';
}

/**
 * Opens a task's state and brings it up to date with its changelogs: replay each changelog
 * partition from the offset stored in the meta entry to its end (all of it for a task new to
 * this folder). The folder is wiped and rebuilt from the changelogs, with a warning and
 * `sluice_errors_total{kind="state_corrupted"}`, when it cannot be trusted:
 * - RocksDB reports corruption, or the meta entry does not decode;
 * - a stored offset lies outside the changelog's range (deleted and recreated, or truncated);
 * - the record fingerprinted at the last checkpoint (`changelogLast`) is no longer at its offset
 *   (recreated and grown past the stored offset, e.g. by another owner, or compacted away).
 *
 * A meta entry without fingerprints (written by an older version) keeps the offset check only.
 */
export async function openTaskState(task: Task, ctx: StateContext): Promise<TaskState | undefined> {
  if (task.sub.stores.length === 0) return undefined;
  const dir = join(ctx.config.state.dir, ctx.appId, task.id);
  const stores = new Map<string, StoreInfo>();
  for (const spec of task.sub.stores) {
    const d = spec.descriptor;
    stores.set(spec.name, {
      spec,
      changelog: changelogTopic(ctx.appId, spec.name),
      serde: d.kind === 'map' ? mapStoreSerde(d.serde) : d.serde,
    });
  }
  const started = Date.now();
  const admin = await ctx.client.admin();
  const ranges = new Map<string, { low: bigint; high: bigint }>();
  for (const [name, info] of stores) {
    const p = (await admin.offsets(info.changelog)).find((x) => x.partition === task.partition);
    if (!p)
      throw new TaskCorruptedError(task.id, `changelog ${info.changelog} has no partition ${task.partition}`);
    ranges.set(name, { low: BigInt(p.low), high: BigInt(p.high) });
  }

  const open = () => RocksStore.open({ dir, stores: [...stores.keys()], taskId: task.id });
  /** Logs why, counts it, and leaves an empty folder to restore into. */
  const wipe = async (current: RocksStore | undefined, why: Record<string, unknown>): Promise<RocksStore> => {
    ctx.logger.warn(
      why,
      'local state does not match its changelog or cannot be read; wiping it and restoring from the changelog',
    );
    ctx.metrics.errors.inc({ app: ctx.appId, kind: 'state_corrupted' });
    await current?.close();
    await RocksStore.destroy(dir);
    return open();
  };

  let rocks: RocksStore;
  try {
    rocks = await open();
  } catch (e) {
    if (!isCorrupted(e)) throw e;
    rocks = await wipe(undefined, { err: e });
  }
  const reader = ctx.client.partitionReader();
  let total = 0;
  let meta: CheckpointMeta;
  try {
    try {
      const metaBytes = rocks.readMeta();
      meta = metaBytes ? decodeCheckpointMeta(metaBytes) : emptyMeta();
    } catch (e) {
      if (!isCorrupted(e)) throw e;
      rocks = await wipe(rocks, { err: e });
      meta = emptyMeta();
    }
    const why = await changelogMismatch(meta, stores, ranges, reader, task.partition);
    if (why) {
      rocks = await wipe(rocks, why);
      meta = emptyMeta();
    }
    meta.changelogLast = { ...meta.changelogLast };
    const changelogLast = meta.changelogLast;

    // Replay.
    let remaining = 0n;
    for (const [name, r] of ranges) {
      const from = meta.changelogOffsets[name] !== undefined ? BigInt(meta.changelogOffsets[name]!) : r.low;
      remaining += r.high - from;
    }
    ctx.metrics.restoreRemaining.set({ app: ctx.appId, task: task.id }, Number(remaining));
    // Every store gets its series, also when nothing is left to replay.
    for (const name of stores.keys()) ctx.metrics.restoreRecords.inc({ app: ctx.appId, store: name }, 0);
    task.restoreProgress = { total: Number(remaining), remaining: Number(remaining) };
    if (remaining > 0n)
      ctx.logger.info(
        { toReplay: Number(remaining), stores: [...stores.keys()] },
        'restoring state from changelog',
      );
    // A long restore says how far it is, every few seconds.
    let nextReport = Date.now() + RESTORE_REPORT_MS;
    for (const [name, info] of stores) {
      const r = ranges.get(name)!;
      const from = meta.changelogOffsets[name] !== undefined ? BigInt(meta.changelogOffsets[name]!) : r.low;
      if (from >= r.high) {
        meta.changelogOffsets[name] = r.high.toString();
        continue;
      }
      let n = 0;
      let lastRecord: ChangelogRecordView | undefined;
      await reader.read({
        topic: info.changelog,
        partition: task.partition,
        from,
        to: r.high,
        onRecords: (records) => {
          const ops: WriteOp[] = records.map((rec) => ({
            store: name,
            key: rec.key ?? Buffer.alloc(0),
            value: rec.value,
          }));
          rocks.writeSync(ops);
          lastRecord = records[records.length - 1];
          n += records.length;
          remaining -= BigInt(records.length);
          const left = Number(remaining > 0n ? remaining : 0n);
          if (task.restoreProgress) task.restoreProgress.remaining = left;
          ctx.metrics.restoreRemaining.set({ app: ctx.appId, task: task.id }, left);
          if (Date.now() >= nextReport) {
            nextReport = Date.now() + RESTORE_REPORT_MS;
            const seconds = (Date.now() - started) / 1000;
            ctx.logger.info(
              {
                replayed: total + n,
                remaining: left,
                perSecond: Math.round((total + n) / seconds),
              },
              'restoring state from changelog',
            );
          }
        },
      });
      // The fingerprint of the last record replayed (hashed once, not per batch).
      if (lastRecord) changelogLast[name] = fingerprintOf(lastRecord);
      total += n;
      ctx.metrics.restoreRecords.inc({ app: ctx.appId, store: name }, n);
      meta.changelogOffsets[name] = r.high.toString();
    }
    meta = { ...meta, writtenAt: Date.now() };
    rocks.writeSync([], encodeCheckpointMeta(meta));
  } catch (e) {
    await rocks.close().catch(() => undefined);
    throw e;
  } finally {
    await reader.close().catch(() => undefined);
  }
  const seconds = (Date.now() - started) / 1000;
  ctx.metrics.restoreDuration.observe({ app: ctx.appId }, seconds);
  ctx.metrics.restoreRemaining.set({ app: ctx.appId, task: task.id }, 0);
  if (task.restoreProgress) task.restoreProgress.remaining = 0;
  ctx.logger.info(
    { restored: total, seconds, stores: [...stores.keys()] },
    total > 0 ? 'state restored from changelog' : 'state up to date',
  );
  const opened = new RocksTaskState(rocks, stores, meta, ctx, task);
  opened.refreshStoreSize();
  return opened;
}

/**
 * Why the local folder does not belong to the changelogs as they are now, or undefined when
 * every store's stored offset lies within its changelog's range and its fingerprinted record
 * (when the meta entry has one) is still at its offset.
 */
async function changelogMismatch(
  meta: CheckpointMeta,
  stores: ReadonlyMap<string, StoreInfo>,
  ranges: ReadonlyMap<string, { low: bigint; high: bigint }>,
  reader: PartitionReader,
  partition: number,
): Promise<Record<string, unknown> | undefined> {
  for (const [name, r] of ranges) {
    const stored = meta.changelogOffsets[name];
    if (stored === undefined) continue;
    const off = BigInt(stored);
    const range = { store: name, stored, low: r.low.toString(), high: r.high.toString() };
    if (off > r.high || off < r.low)
      return { ...range, reason: 'stored offset outside the changelog (deleted and recreated?)' };
    const fp: ChangelogFingerprint | undefined = meta.changelogLast?.[name];
    if (fp === undefined) continue;
    const at = BigInt(fp.offset);
    let found: ChangelogRecordView | undefined;
    if (at >= r.low && at < r.high) {
      await reader.read({
        topic: stores.get(name)!.changelog,
        partition,
        from: at,
        to: at + 1n,
        onRecords: (records) => {
          found ??= records[0];
        },
      });
    }
    const reason = fingerprintMismatch(fp, found);
    if (reason) return { ...range, reason: `last checkpoint's changelog record differs: ${reason}` };
  }
  return undefined;
}
