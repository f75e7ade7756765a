import type { CheckpointMeta } from '../state/checkpoint-meta.js';
import { latinOp, type WriteOp } from '../state/rocks-store.js';
import type { LatinOps } from '../state/rocks-writer-format.js';

/**
 * Where a flush in steps goes: `write` takes one batch and may settle later (false: the store is
 * gone, the flush stops); `done`, once every batch is in, writes the meta entry that says so.
 */
export interface FlushSink {
  write(ops: LatinOps): Promise<void> | false;
  done(): void;
}

/** Keys per RocksDB batch of a flush in steps: one packed buffer for the writer thread per turn. */
export const FLUSH_BATCH_OPS = 2048;

/** What a waiting key costs besides its key and value bytes (two string headers, the map entry). */
const OVERHEAD = 64;

/**
 * Committed writes of a task's value stores that RocksDB has not taken yet (the local checkpoint,
 * `state.localCheckpointRecords`). A checkpoint commits its changelog records to Kafka, which is
 * the source of truth; writing the same keys to RocksDB at every checkpoint made the RocksDB batch
 * the largest single cost of a keyed worker (bench/profile.ts: 13–16 % of its busy CPU). Kafka
 * Streams likewise writes its local checkpoint under exactly-once only every 10,000 records (and
 * its RocksDB takes each put into a memtable, without a write-ahead log, which this binding
 * cannot turn off).
 *
 * So the committed writes of value stores gather here, one op per key (the newest), until enough
 * changelog records went by; then they go to RocksDB in one batch with the meta entry that says
 * which changelog offsets the stores now hold. Until then:
 * - reads of those keys that miss the write-back cache are answered from here, never from the
 *   older RocksDB value (the cache's loader, read-ahead and state queries look here first);
 * - RocksDB's meta entry keeps the older changelog offsets of those stores, so a crash replays
 *   the changelog from there (at most this many records per store), and the restored state is
 *   the committed one.
 *
 * Only value stores wait: map and list stores, timers and async stages are read by range scans
 * of RocksDB, which this does not answer; their writes go to RocksDB at every checkpoint.
 */
export class WriteBehind {
  /**
   * Store → key → value (`null`: deleted), both as latin1 strings (one char per byte): a short
   * string costs a few words, a Buffer view about a hundred bytes of heap, and pins the pooled
   * slab it was cut from.
   */
  #stores = new Map<string, Map<string, string | null>>();
  #records = 0;
  #bytes = 0;
  /**
   * What a flush in steps ({@link flush}) is handing to RocksDB: taken from `#stores` when it
   * began, read under the writes that came after it until RocksDB has all of it.
   */
  #flushing: Map<string, Map<string, string | null>> | undefined;
  /** What stopped the flush in steps (a write that failed); its writes still wait. */
  failed: unknown;
  /** Settles when the flush in steps that began last is over. */
  #settled: Promise<void> = Promise.resolve();

  /**
   * `maxRecords`: changelog records that may wait (0: none); `maxBytes()`: the memory they may hold
   * (the caller gives a quarter of its task's share of `state.cacheMaxBytes`).
   */
  constructor(
    readonly maxRecords: number,
    readonly maxBytes: () => number,
  ) {}

  /** Keys waiting, over all stores (a key waiting twice, flushing and after, counts twice). */
  get size(): number {
    let n = 0;
    for (const m of this.#stores.values()) n += m.size;
    if (this.#flushing) for (const m of this.#flushing.values()) n += m.size;
    return n;
  }

  /** True while a flush in steps is under way. */
  get flushing(): boolean {
    return this.#flushing !== undefined;
  }

  /**
   * Takes one checkpoint's committed ops (newest last), each a changelog record; `k`: the key as
   * latin1 where the op has it (the write-back cache's dirty entries do), saving the conversion.
   */
  add(ops: ReadonlyArray<WriteOp & { k?: string }>): void {
    for (const op of ops) {
      let m = this.#stores.get(op.store);
      if (m === undefined) this.#stores.set(op.store, (m = new Map()));
      const k = op.k ?? op.key.toString('latin1');
      const had = m.get(k);
      if (had !== undefined) this.#bytes -= sizeOf(k, had);
      const v = op.value === null ? null : op.value.toString('latin1');
      m.set(k, v);
      this.#bytes += sizeOf(k, v);
    }
    this.#records += ops.length;
  }

  /** Whether RocksDB should take what waits now. */
  get due(): boolean {
    return this.#records >= this.maxRecords || this.#bytes >= this.maxBytes();
  }

  /**
   * The committed value of `key` when one waits (`null`: deleted), else undefined: RocksDB's value
   * is the committed one. No key is converted while nothing of `store` waits; `k`: the key as
   * latin1, when the caller has it.
   */
  get(store: string, key: Buffer, k?: string): Buffer | null | undefined {
    const m = this.#stores.get(store);
    const f = this.#flushing?.get(store);
    if ((m === undefined || m.size === 0) && (f === undefined || f.size === 0)) return undefined;
    const kk = k ?? key.toString('latin1');
    let v = m?.get(kk);
    if (v === undefined) v = f?.get(kk);
    return v === undefined || v === null ? v : Buffer.from(v, 'latin1');
  }

  /** The ops waiting for `store`, in no particular order. */
  *of(store: string): Iterable<WriteOp> {
    const m = this.#stores.get(store);
    const f = this.#flushing?.get(store);
    if (f !== undefined) for (const [k, v] of f) if (!m?.has(k)) yield latinOp(store, k, v);
    if (m !== undefined) for (const [k, v] of m) yield latinOp(store, k, v);
  }

  /** Every op waiting, for one RocksDB batch; they are forgotten once the batch is written ({@link clear}). */
  all(): WriteOp[] {
    const out: WriteOp[] = [];
    for (const store of new Set([...(this.#flushing?.keys() ?? []), ...this.#stores.keys()]))
      for (const op of this.of(store)) out.push(op);
    return out;
  }

  /** After RocksDB took {@link all}'s ops, or when the task's state is dropped; stops a flush in steps. */
  clear(): void {
    this.#stores.clear();
    this.#flushing = undefined;
    this.failed = undefined;
    this.#records = 0;
    this.#bytes = 0;
  }

  /**
   * Hands what waits now to RocksDB in batches of `batchOps`, one batch per turn of the event
   * loop, so that a large flush (100,000 keys of a keyed count took 230 ms in one batch) does
   * not hold the processing thread. `sink.write` takes a batch and may settle later (the writer
   * thread writes them in order while the next is taken; false: the store is gone, the flush
   * stops); once every batch is in, `sink.done` writes the meta entry saying that RocksDB holds
   * all of it. Until then, what was taken keeps answering reads under the writes that came after
   * it, and a crash replays the changelogs from the meta entry before the flush: a value store's
   * records replayed over newer values end at the same values. A write that fails stops the
   * flush and is kept in {@link failed}; its writes keep waiting (a clean close writes them).
   */
  flush(batchOps: number, sink: FlushSink): void {
    if (this.#flushing !== undefined) return;
    const taken = this.#stores;
    this.#flushing = taken;
    this.#stores = new Map();
    this.#records = 0;
    this.#bytes = 0;
    const entries = (function* () {
      for (const [store, m] of taken) for (const [k, v] of m) yield [store, k, v] as const;
    })();
    let next = entries.next();
    let resolve!: () => void;
    this.#settled = new Promise<void>((r) => {
      resolve = r;
    });
    let sent = false; // no more batches will be handed over
    let stopped = false; // the store is gone: nothing more happens
    let pending = 0;
    let error: unknown;
    const over = () => {
      if (!sent || pending > 0) return;
      if (this.#flushing === taken && !stopped) {
        try {
          if (error !== undefined) throw error;
          sink.done();
          this.#flushing = undefined;
        } catch (e) {
          this.failed = e;
          this.#restore(taken);
        }
      }
      resolve();
    };
    const written = () => {
      pending--;
      over();
    };
    const failed = (e: unknown) => {
      error ??= e;
      written();
    };
    const step = () => {
      // Cleared (the task's state was dropped or written whole) or failed: nothing more is sent.
      if (this.#flushing !== taken || error !== undefined) {
        sent = true;
        return over();
      }
      const ops: LatinOps = { stores: [], keys: [], values: [] };
      while (!next.done && ops.keys.length < batchOps) {
        const [store, k, v] = next.value;
        ops.stores.push(store);
        ops.keys.push(k);
        ops.values.push(v);
        next = entries.next();
      }
      let w: Promise<void> | false;
      try {
        w = sink.write(ops);
      } catch (e) {
        w = Promise.reject(e);
      }
      if (w === false) stopped = true;
      else {
        pending++;
        w.then(written, failed);
      }
      if (next.done || stopped) {
        sent = true;
        over();
      } else setImmediate(step);
    };
    setImmediate(step);
  }

  /** Settles when the flush in steps under way (if any) is over, written or failed. */
  settled(): Promise<void> {
    return this.#flushing === undefined ? Promise.resolve() : this.#settled;
  }

  /** A failed flush's writes wait again, under those that came after them. */
  #restore(taken: Map<string, Map<string, string | null>>): void {
    this.#flushing = undefined;
    for (const [store, f] of taken) {
      let m = this.#stores.get(store);
      if (m === undefined) this.#stores.set(store, (m = new Map()));
      for (const [k, v] of f)
        if (!m.has(k)) {
          m.set(k, v);
          this.#bytes += sizeOf(k, v);
        }
    }
  }
}

/**
 * The meta entry to write with a checkpoint whose value-store writes wait: `stored` (what RocksDB
 * holds) with, for each of `stores` (those the checkpoint wrote to their changelogs), the last
 * record from `meta`, and the offset too unless its writes are `waiting` (RocksDB lacks them).
 * A store's fingerprint thus always names the newest committed record of its changelog, which
 * compaction never removes while this task owns it; one left at the older offset could be
 * compacted away in a long wait, and a crash would then rebuild the folder from the whole
 * changelog (restore.ts takes a missing fingerprinted record for a foreign changelog).
 */
export function storedMeta(
  stored: CheckpointMeta,
  meta: CheckpointMeta,
  stores: readonly string[],
  waiting: ReadonlySet<string>,
): CheckpointMeta {
  const out = copyMeta(stored, meta.writtenAt);
  for (const store of stores) {
    const offset = meta.changelogOffsets[store];
    if (offset !== undefined && !waiting.has(store)) out.changelogOffsets[store] = offset;
    const last = meta.changelogLast?.[store];
    if (last !== undefined) out.changelogLast![store] = last;
  }
  return out;
}

/**
 * The meta entry that goes with a flush's last batch: `stored` (what RocksDB holds, fingerprints
 * included) with the offsets of `to`, the checkpoint that began the flush, for the `waiting`
 * stores: RocksDB now holds every write of theirs up to it. Later writes still wait.
 */
export function flushedMeta(
  stored: CheckpointMeta,
  to: CheckpointMeta,
  waiting: ReadonlySet<string>,
): CheckpointMeta {
  const out = copyMeta(stored, stored.writtenAt);
  for (const store of waiting) {
    const offset = to.changelogOffsets[store];
    if (offset !== undefined) out.changelogOffsets[store] = offset;
  }
  return out;
}

/** A copy of `stored` to change (its offsets and fingerprints), written at `writtenAt`. */
function copyMeta(stored: CheckpointMeta, writtenAt: number): CheckpointMeta {
  return {
    version: 1,
    changelogOffsets: { ...stored.changelogOffsets },
    changelogLast: { ...stored.changelogLast },
    writtenAt,
  };
}

function sizeOf(k: string, v: string | null): number {
  return OVERHEAD + k.length + (v?.length ?? 0);
}
