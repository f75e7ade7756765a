import type { Op } from './operators.js';
import type { MutableRecordContext } from './record-context.js';
import { approxSize } from './task-state.js';

const EMPTY = Buffer.alloc(0);

/**
 * The record cache of a task (Kafka Streams' `statestore.cache.max.bytes`): the updates an
 * aggregation (`count`, `reduce`, `aggregate`, and windowed ones that emit on every update)
 * sends downstream are held per key, and per window, the newest replacing the one before, and
 * go downstream at the task's next checkpoint, just before its snapshot. Downstream operators
 * and the output thus see at most one update per key per checkpoint instead of one per record,
 * and so does the changelog of a downstream aggregation. Nothing is later than before: outputs
 * become visible only when a checkpoint commits anyway.
 *
 * Bounded in bytes (`state.recordCacheMaxBytes`, shared out between a worker's tasks): past the
 * bound, the least recently updated entries go downstream at the end of the batch (never in the
 * middle of another record's processing, whose rollback would take them back). A bound of 0
 * turns the cache off: every update goes downstream at once, as `process` always does.
 */
export interface CacheEntry {
  down: Op;
  key: unknown;
  value: unknown;
  timestamp: number;
  headers: Record<string, unknown> | undefined;
  size: number;
}

/** Runs one flushed entry's downstream push (the record loop's guard: rollback, error policy). */
export type FlushGuard = (push: () => void, e: CacheEntry, operator: string) => void;

export class RecordCache {
  readonly #entries = new Map<string, CacheEntry & { operator: string }>();
  #bytes = 0;
  readonly #maxBytes: () => number;
  readonly #guard: FlushGuard;
  /** Updates absorbed (replaced before they went downstream), for metrics. */
  absorbed = 0;

  constructor(maxBytes: () => number, guard: FlushGuard) {
    this.#maxBytes = maxBytes;
    this.#guard = guard;
  }

  get size(): number {
    return this.#entries.size;
  }
  get bytes(): number {
    return this.#bytes;
  }
  get enabled(): boolean {
    return this.#maxBytes() > 0;
  }

  /**
   * The downstream op of a cached aggregation: holds each update, per key (and, with `slot`, per
   * window start) of operator `id`, in place of pushing it. Pushes straight through when the
   * cache is off.
   */
  wrap(id: number, operator: string, down: Op, rc: MutableRecordContext, slot?: (v: unknown) => unknown): Op {
    const prefix = `${id}\u0000`;
    return {
      push: (key, value) => {
        if (!this.enabled) return down.push(key, value);
        const k = keyString(key);
        const id = slot === undefined ? prefix + k : `${prefix}${k}\u0000${String(slot(value))}`;
        const size = approxSize(EMPTY, value) + id.length;
        const prev = this.#entries.get(id);
        if (prev !== undefined) {
          this.#bytes -= prev.size;
          this.absorbed++;
          // Re-inserted at the end: the map's order is the order of last update (LRU).
          this.#entries.delete(id);
        }
        this.#entries.set(id, {
          down,
          key,
          value,
          timestamp: rc.timestamp,
          headers: rc.headers,
          size,
          operator,
        });
        this.#bytes += size;
      },
    };
  }

  /** Sends everything downstream, oldest update first (at a checkpoint). */
  flush(rc: MutableRecordContext): number {
    return this.#drain(rc, 0);
  }

  /** Sends the oldest updates downstream until the cache is within its bound (after a batch). */
  evict(rc: MutableRecordContext): number {
    const max = this.#maxBytes();
    return this.#bytes > max ? this.#drain(rc, max) : 0;
  }

  /** Forgets everything (a reset: nothing since the last checkpoint counts). */
  clear(): void {
    this.#entries.clear();
    this.#bytes = 0;
  }

  #drain(rc: MutableRecordContext, downTo: number): number {
    let n = 0;
    const { key, timestamp, headers, topic, offset } = rc;
    try {
      for (const [id, e] of this.#entries) {
        if (this.#bytes <= downTo && downTo > 0) break;
        this.#entries.delete(id);
        this.#bytes -= e.size;
        n++;
        rc.key = e.key;
        rc.timestamp = e.timestamp;
        rc.headers = e.headers;
        this.#guard(() => e.down.push(e.key, e.value), e, e.operator);
      }
      if (this.#entries.size === 0) this.#bytes = 0;
    } finally {
      rc.key = key;
      rc.timestamp = timestamp;
      rc.headers = headers;
      rc.topic = topic;
      rc.offset = offset;
    }
    return n;
  }
}

/** A cache key for a record key: strings and numbers as they are, anything else as JSON. */
function keyString(k: unknown): string {
  if (typeof k === 'string') return `s${k}`;
  if (typeof k === 'number' || typeof k === 'bigint' || typeof k === 'boolean') return `n${String(k)}`;
  if (k === null || k === undefined) return 'z';
  if (Buffer.isBuffer(k)) return `b${k.toString('latin1')}`;
  try {
    return `j${JSON.stringify(k)}`;
  } catch {
    return `o${String(k)}`;
  }
}
