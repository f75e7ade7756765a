import type { Serde } from '../api/serdes.js';
import type { SluiceConfig } from '../config/schema.js';
import { SluiceError } from '../errors.js';
import type { KafkaClient } from '../kafka/client.js';
import type { WrittenOffsets } from '../kafka/producer.js';
import { BATCH_OVERHEAD, builderBound } from '../kafka/record-batch.js';
import type { OutRecord } from '../kafka/types.js';
import type { Logger } from '../ops/logger.js';
import type { WorkerMetrics } from '../ops/metrics.js';
import type { RocksStore, RocksStoreOptions } from '../state/rocks-store.js';
import type { WriteBackCache } from '../state/write-back-cache.js';
import type { GraphNode, StoreSpec } from '../topology/nodes.js';
import type { Collector } from './collector.js';
import type { Op } from './operators.js';
import type { MutableRecordContext } from './record-context.js';

/**
 * What a task needs of its keyed state: operators bound to it, the changelog records of what
 * changed since the last checkpoint, and the local commit that follows a Kafka commit.
 */
export interface TaskState {
  /** True when some store changed since the last checkpoint. */
  readonly dirty: boolean;
  processOp(node: GraphNode, downstream: Op, rc: MutableRecordContext, collector: Collector, late?: Op): Op;
  /** The stores and cache that handles, timers and async stages are built on. */
  readonly keyed?: KeyedState;
  /** Adds the latest value (or a tombstone) of every dirty key to `out`, by changelog topic. */
  /** `batched`: written into record batches (record-batch.ts), as the task's producer sends them. */
  writeChangelog(out: Map<string, OutRecord[]>, partition: number, batched?: boolean): void;
  /** After the Kafka commit: one atomic RocksDB batch with the dirty keys and the meta entry. */
  commitLocal(written: WrittenOffsets): Promise<void>;
  /** Fires due timers (event time up to the watermark, processing time up to now; either may be skipped). */
  advanceTime(watermark: number | undefined, now: number | undefined, guard?: TimerGuard): number;
  /** Pushes cache counters to the metrics. */
  flushCacheMetrics(): void;
  /** Sets the memory bound of the task's write-back cache (its share of the worker's). */
  resizeCache?(maxBytes: number): void;
  /** Reads these keys of these value stores into the cache ahead of their records (read-ahead.ts). */
  readAhead?(stores: readonly string[], keys: Buffer[], background: boolean): void;
  /**
   * Reads one key of a store for a state query: the write-back cache first (so the answer
   * includes writes not yet checkpointed), then RocksDB; `undefined` when absent. A map or list
   * store answers the record key's whole map (`Map`) or list (array).
   */
  read?(store: string, key: Buffer): unknown;
  /**
   * Releases the state. `clean`: the task closes after its final checkpoint (a revocation, a
   * stop), so committed writes still in memory go to RocksDB and the next open replays nothing;
   * otherwise (a reset, a fenced task, the test driver's crash) they are left to the changelogs.
   */
  close(opts?: { clean?: boolean }): Promise<void>;
}

/** A timer that is due: its time, its record key (serialized) and its domain. */
export interface DueTimer {
  readonly ts: number;
  readonly key: Buffer;
  readonly domain: 'event' | 'processing';
}

/**
 * Runs one due timer's `onTimer` (`fire`): the task's record loop gives it a clean record context,
 * takes back its outputs if it throws, and applies the error policy (see record-loop.ts).
 */
export type TimerGuard = (fire: () => void, timer: DueTimer) => void;

/** Something that fires due timers (a process operator's `TimerService`). */
export interface TimerSource {
  /**
   * Fires every timer of `domain` due at `upTo` (inclusive), in time order, each through `guard`
   * when given. Returns how many.
   */
  fire(domain: 'event' | 'processing', upTo: number, guard?: TimerGuard): number;
  /**
   * A checkpoint takes its snapshot of the dirty state (before its changelog records are made);
   * its writes to the cache (an async stage's records in flight) belong to that checkpoint.
   */
  snapshot?(): void;
  /** That checkpoint committed: RocksDB holds what it wrote. */
  committed?(): void;
}

/**
 * What the state handles and timers of a process operator need of their task's keyed state
 * (`RocksTaskState`): the write-back cache, the RocksDB stores behind it (timers and map/list
 * reads range-read them),
 * a count of writes, and a place to register timers.
 * An interface here, so that keyed-process.ts and timers.ts need not import rocks-task-state.ts
 * (which compiles process operators with them).
 */
export interface KeyedState {
  readonly rocks: RocksStore;
  readonly cache: WriteBackCache<unknown>;
  /** Marks a write (the cache tracks which keys; this tracks that there is something to do). */
  noteWrite(): void;
  registerTimers(t: TimerSource): void;
}

/**
 * Rough in-memory size of a decoded value, for the cache's memory bound. It must be cheap (it
 * runs on every write); it errs high for small values, which is the safe side.
 */
/**
 * A state value's bytes for the checkpoint. A value its serde cannot write (one of Sluice's own
 * aggregations returning a BigInt, a custom serde that throws) has no record left to blame and
 * would fail every checkpoint: the worker fails instead (`SLUICE_OPERATOR`, as under the `fail`
 * policy), naming the store. A user's state under `json()` fails earlier, where it is set.
 */
export function stateValueBytes(serde: Serde<unknown>, value: unknown, store: string): Buffer | null {
  try {
    return serde.serialize(value);
  } catch (e) {
    throw new SluiceError(
      'SLUICE_OPERATOR',
      `state store ${store}: a value its serde (${serde.name}) cannot write: ${(e as Error)?.message ?? String(e)}; fix the job (or the serde) and start again`,
      { cause: e },
    );
  }
}

/**
 * A changelog record larger than its topic takes (`max.message.bytes`) would be refused at every
 * checkpoint, and the state cannot be written without it. It is found before anything is sent,
 * where no record is left to dead-letter (the value is written at the checkpoint, for the last
 * state of its key): the worker fails (`SLUICE_OPERATOR`, as under the `fail` policy), naming the
 * store, the size and the bound, as Kafka Streams' default production handler fails its thread.
 * Returns the bound of the changelog's record batches (under a small `max.message.bytes`).
 */
export function changelogBound(
  store: string,
  topic: string,
  key: Buffer,
  value: Buffer | null,
  limits: ReadonlyMap<string, number> | undefined,
): number {
  const max = limits?.get(topic) ?? 0;
  const bytes = key.length + (value?.length ?? 0);
  if (max > 0 && bytes + BATCH_OVERHEAD > max)
    throw new SluiceError(
      'SLUICE_OPERATOR',
      `state store ${store}: a state of ${bytes} bytes (key and value) is over the ${max} bytes its changelog ${topic} takes (max.message.bytes); keep the state smaller (a mapState or listState writes one record per entry) or raise the topic's max.message.bytes, then start again`,
    );
  return builderBound(max);
}

export function approxSize(key: Buffer, v: unknown): number {
  const base = 96 + key.length;
  if (v === null || v === undefined || typeof v === 'number' || typeof v === 'boolean') return base;
  if (typeof v === 'string') return base + 2 * v.length;
  if (v instanceof Map) return base + 96 * v.size;
  if (Array.isArray(v)) return base + 64 * v.length;
  return base + 256;
}

/** A store of a task: its spec, its changelog topic and the serde of its values. */
export interface StoreInfo {
  spec: StoreSpec;
  changelog: string;
  serde: Serde<any>;
}

/** What opening a task's state needs. */
export interface StateContext {
  client: KafkaClient;
  metrics: WorkerMetrics;
  logger: Logger;
  config: Readonly<SluiceConfig>;
  appId: string;
  /** Bytes of cache this task may use (the worker's bound shared out between its tasks). */
  cacheBytes?: number;
  /** Opens and wipes task folders: `RocksStore` (default), or the test driver's in-memory stand-in. */
  storage?: { open(o: RocksStoreOptions): Promise<RocksStore>; destroy(dir: string): Promise<void> };
}
