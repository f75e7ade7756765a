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

/**
 * One held update: in its operator's map, and in the cache's list of updates by age (oldest at
 * the head), which is the order of the flush and of the eviction across all operators. An update
 * to a held key reuses its node (no allocation per record) and moves it to the tail.
 */
interface Node extends CacheEntry {
  operator: string;
  map: Map<unknown, Node>;
  mapKey: unknown;
  prev: Node | undefined;
  next: Node | undefined;
}

export class RecordCache {
  #head: Node | undefined;
  #tail: Node | undefined;
  #size = 0;
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
    return this.#size;
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
   * cache is off. Each operator has its own maps, so no key string is built per record: a string
   * or number key is the map key itself (1 and "1" stay apart: a Map compares by type), anything
   * else, and a key with a window, is encoded (`keyString`).
   */
  wrap(id: number, operator: string, down: Op, rc: MutableRecordContext, slot?: (v: unknown) => unknown): Op {
    // The bytes an entry counts for its id: as when the id was `${id}\0${type char}${key}`.
    const idBytes = String(id).length + 2;
    const raw = new Map<unknown, Node>();
    const encoded = new Map<unknown, Node>();
    return {
      push: (key, value) => {
        if (!this.enabled) return down.push(key, value);
        let map: Map<unknown, Node>;
        let mk: unknown;
        let keyBytes: number;
        if (slot === undefined && typeof key === 'string') {
          map = raw;
          mk = key;
          keyBytes = key.length;
        } else if (slot === undefined && typeof key === 'number') {
          map = raw;
          mk = key;
          keyBytes = String(key).length;
        } else {
          const k = keyString(key);
          const ks = slot === undefined ? k : `${k}\u0000${String(slot(value))}`;
          map = encoded;
          mk = ks;
          keyBytes = ks.length - 1;
        }
        const size = approxSize(EMPTY, value) + idBytes + keyBytes;
        const prev = map.get(mk);
        if (prev !== undefined) {
          this.#bytes -= prev.size;
          this.absorbed++;
          // Moved to the tail: the list's order is the order of last update (LRU).
          this.#unlink(prev);
          prev.key = key;
          prev.value = value;
          prev.timestamp = rc.timestamp;
          prev.headers = rc.headers;
          prev.size = size;
          this.#append(prev);
        } else {
          const n: Node = {
            down,
            key,
            value,
            timestamp: rc.timestamp,
            headers: rc.headers,
            size,
            operator,
            map,
            mapKey: mk,
            prev: undefined,
            next: undefined,
          };
          map.set(mk, n);
          this.#size++;
          this.#append(n);
        }
        this.#bytes += size;
      },
    };
  }

  /** Sends everything downstream, oldest update first (at a checkpoint). */
  flush(): number {
    return this.#drain(0);
  }

  /** Sends the oldest updates downstream until the cache is within its bound (after a batch). */
  evict(): number {
    const max = this.#maxBytes();
    return this.#bytes > max ? this.#drain(max) : 0;
  }

  /** Forgets everything (a reset: nothing since the last checkpoint counts). */
  clear(): void {
    for (let n = this.#head; n !== undefined; n = n.next) n.map.clear();
    this.#head = this.#tail = undefined;
    this.#size = 0;
    this.#bytes = 0;
  }

  #append(n: Node): void {
    n.prev = this.#tail;
    n.next = undefined;
    if (this.#tail === undefined) this.#head = n;
    else this.#tail.next = n;
    this.#tail = n;
  }

  #unlink(n: Node): void {
    if (n.prev === undefined) this.#head = n.next;
    else n.prev.next = n.next;
    if (n.next === undefined) this.#tail = n.prev;
    else n.next.prev = n.prev;
    n.prev = n.next = undefined;
  }

  /**
   * Pushes the oldest entries downstream, one at a time from the head, so that an update a push
   * adds (a downstream cached aggregation) or moves goes in the same drain, at its new place.
   */
  #drain(downTo: number): number {
    let n = 0;
    // The guard (the record loop's) gives each push the entry's key, time and headers, and
    // restores the record context after it.
    for (let e = this.#head; e !== undefined; e = this.#head) {
      if (this.#bytes <= downTo && downTo > 0) break;
      this.#unlink(e);
      e.map.delete(e.mapKey);
      this.#size--;
      this.#bytes -= e.size;
      n++;
      const { down, key: k, value: v } = e;
      this.#guard(() => down.push(k, v), e, e.operator);
    }
    if (this.#size === 0) this.#bytes = 0;
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
