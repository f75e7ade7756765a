import type { AsyncContext, AsyncSettings } from '../api/async.js';

export { AsyncBudget, AsyncTimeoutError, type InFlight } from './async-record.js';

import { isSluiceFault, OperatorError } from '../errors.js';
import type { GraphNode } from '../topology/nodes.js';
import {
  type AsyncBudget,
  AsyncTimeoutError,
  decodeInFlight,
  encodeInFlight,
  type InFlight,
  keyId,
  NO_RESULT,
  seqKey,
} from './async-record.js';
import type { Op } from './operators.js';
import type { MutableRecordContext } from './record-context.js';
import type { KeyedState } from './task-state.js';

/** How an async stage calls the user's code and applies what it gave (async-ops.ts). */
export interface AsyncBehaviour {
  /** One attempt: the user function's Promise. */
  call(r: InFlight, ctx: AsyncContext<unknown>): unknown;
  /** Applies a completed record's result (pushes downstream, writes state). Throws like an operator. */
  apply(r: InFlight, result: unknown): void;
  /** Records of one key run one at a time and leave in order (keyed state, or `ordered: key`). */
  readonly serialPerKey: boolean;
}

export interface AsyncStageEnv {
  node: GraphNode;
  settings: AsyncSettings;
  /** The task's state, holding the stage's store `store` (records in flight at a checkpoint). */
  st: KeyedState;
  store: string;
  budget: AsyncBudget;
  /**
   * Runs a completed record's effects with the task's record context set to the record's, its
   * outputs taken back if they throw, and the error policy applied (record-loop.ts). Throws a
   * fault of Sluice or the machine, or the `fail` policy's error.
   */
  guard(r: InFlight, apply: () => void): void;
  /** A release threw (a fault, or the `fail` policy): the task fails or resets. */
  fail(e: unknown): void;
  /** Called when the stage's record count changed (metrics, backpressure waiters). */
  changed(): void;
  observe(outcome: 'done' | 'timeout' | 'retry', ms: number, stage: AsyncStage): void;
}

const MAX_BACKOFF_MS = 30_000;

/**
 * An async stage of a task (`mapAsync`, `filterAsync`, `flatMapAsync`, an async `process`):
 * records enter synchronously from the operator chain, run in the user function up to
 * `concurrency` at once, and leave (their effects applied downstream, through the guard) in the
 * order `ordered` asks for.
 *
 * Exactly-once without waiting for the stage to drain: a checkpoint commits the input offsets
 * past every record fetched, and stores with them (in this stage's changelogged store, in the
 * same transaction) the records still in the stage; a later checkpoint deletes those that have
 * left. A record's effects are applied at once when it leaves, so a checkpoint sees each record
 * either wholly applied or in the store, never half. After a crash (or a reset, or on another
 * worker), the task's restore brings the store back and the stage runs those records again
 * before any newer input: effects once, calls at least once.
 */
export class AsyncStage implements Op {
  readonly #env: AsyncStageEnv;
  readonly #b: AsyncBehaviour;
  /** Every record in the stage, in the order they entered. */
  readonly #all = new Map<number, InFlight>();
  /** Per key (serial stages): its records not yet left; the first may run. */
  readonly #keys = new Map<unknown, InFlight[]>();
  /** Records that may start, waiting for a slot. */
  #ready: InFlight[] = [];
  #readyHead = 0;
  #running = 0;
  #seq = 0;
  /** Sequence numbers of stored records that have left since the last checkpoint's snapshot. */
  #left: number[] = [];
  #closed = false;
  readonly #timers = new Set<ReturnType<typeof setTimeout>>();
  readonly #rc: MutableRecordContext;

  constructor(env: AsyncStageEnv, behaviour: AsyncBehaviour, rc: MutableRecordContext) {
    this.#env = env;
    this.#b = behaviour;
    this.#rc = rc;
    env.st.registerTimers({ fire: () => 0, snapshot: () => this.#snapshot() });
    // The records a checkpoint stored (a crash, a reset or a move came after it): they go first.
    for (const [k, v] of env.st.rocks.scanSync(env.store)) {
      const r = decodeInFlight(k, v);
      this.#seq = Math.max(this.#seq, r.seq + 1);
      this.#enter(r);
    }
  }

  get name(): string {
    return this.#env.node.name;
  }

  get concurrency(): number {
    return this.#env.settings.concurrency;
  }

  /** Stored records have left since the last checkpoint (the next one must delete them). */
  get dirty(): boolean {
    return this.#left.length > 0;
  }

  /** Records in the stage (waiting, running, or done and waiting for their turn to leave). */
  get size(): number {
    return this.#all.size;
  }

  /** Fetching should wait: twice `concurrency` records held, or the worker's byte bound reached. */
  get backlogged(): boolean {
    return this.#all.size >= 2 * this.#env.settings.concurrency || this.#env.budget.full;
  }

  /** Records of the stage start only once the task runs (a restored stage waits for that). */
  #started = false;
  start(): void {
    this.#started = true;
    this.#pump();
  }

  push(key: unknown, value: unknown): void {
    const c = this.#rc;
    const raw = c.raw;
    const bytes = 128 + (raw ? (raw.key?.length ?? 0) + (raw.value?.length ?? 0) : 256);
    const r: InFlight = {
      seq: this.#seq++,
      key,
      value,
      rc: {
        topic: c.topic,
        partition: c.partition,
        offset: c.offset,
        timestamp: c.timestamp,
        headers: c.headers,
      },
      raw: raw && {
        key: raw.key,
        value: raw.value,
        timestamp: raw.timestamp,
        headers: raw.headers,
        offset: raw.offset,
      },
      state: 'waiting',
      result: NO_RESULT,
      error: undefined,
      persisted: false,
      bytes,
      enteredAt: performance.now(),
    };
    this.#enter(r);
    this.#pump();
  }

  #enter(r: InFlight): void {
    this.#all.set(r.seq, r);
    this.#env.budget.bytes += r.bytes;
    if (this.#b.serialPerKey) {
      const id = keyId(r.key);
      const q = this.#keys.get(id);
      if (q) q.push(r);
      else {
        this.#keys.set(id, [r]);
        this.#ready.push(r);
      }
    } else this.#ready.push(r);
    this.#env.changed();
  }

  #pump(): void {
    if (!this.#started || this.#closed) return;
    const max = this.#env.settings.concurrency;
    while (this.#running < max && this.#readyHead < this.#ready.length) {
      const r = this.#ready[this.#readyHead++]!;
      r.state = 'running';
      this.#running++;
      this.#attempt(r, 0);
    }
    if (this.#readyHead > 1024 && this.#readyHead * 2 > this.#ready.length) {
      this.#ready = this.#ready.slice(this.#readyHead);
      this.#readyHead = 0;
    }
  }

  #attempt(r: InFlight, attempt: number): void {
    const { timeoutMs } = this.#env.settings;
    // The AbortController is made when the function reads `ctx.signal` (most never do: one per
    // attempt cost about 5 % of a fast stage's CPU); aborted at once if read after the timeout.
    let ac: AbortController | undefined;
    let aborted: unknown;
    const ctx: AsyncContext<unknown> = {
      key: r.key,
      topic: r.rc.topic,
      partition: r.rc.partition,
      offset: r.rc.offset,
      timestamp: r.rc.timestamp,
      headers: r.rc.headers,
      get signal() {
        if (ac === undefined) {
          ac = new AbortController();
          if (aborted !== undefined) ac.abort(aborted);
        }
        return ac.signal;
      },
      attempt,
    };
    let settled = false;
    const started = performance.now();
    const settle = (ok: boolean, v: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      this.#timers.delete(timer);
      if (this.#closed) return;
      if (ok) return this.#done(r, v, undefined);
      // A fault of Sluice or the machine (a state read in an async process) is not retried.
      if (attempt < this.#env.settings.retries && !isSluiceFault(v)) {
        this.#env.observe('retry', performance.now() - started, this);
        const wait = Math.min(MAX_BACKOFF_MS, this.#env.settings.backoffMs * 2 ** attempt);
        const t = setTimeout(() => {
          this.#timers.delete(t);
          if (!this.#closed) this.#attempt(r, attempt + 1);
        }, wait);
        this.#timers.add(t);
        return;
      }
      this.#done(r, NO_RESULT, v);
    };
    const timer = setTimeout(() => {
      const e = new AsyncTimeoutError(this.#env.node.name, timeoutMs);
      this.#env.observe('timeout', timeoutMs, this);
      settle(false, e);
      aborted = e;
      ac?.abort(e);
    }, timeoutMs);
    this.#timers.add(timer);
    let p: unknown;
    try {
      p = this.#b.call(r, ctx);
    } catch (e) {
      settle(false, e);
      return;
    }
    Promise.resolve(p).then(
      (v) => settle(true, v),
      (e) => settle(false, e),
    );
  }

  #done(r: InFlight, result: unknown, error: unknown): void {
    r.state = 'done';
    r.result = result;
    r.error = error;
    this.#running--;
    if (this.#env.settings.ordered === 'partition') {
      // Leave in input order: the oldest records, as long as they are done.
      for (const first of this.#all.values()) {
        if (first.state !== 'done' || this.#closed) break;
        this.#leave(first);
      }
    } else this.#leave(r);
    this.#pump();
  }

  /** A record leaves: its effects are applied (through the guard), its key's next may start. */
  #leave(r: InFlight): void {
    this.#all.delete(r.seq);
    this.#env.budget.bytes -= r.bytes;
    if (r.persisted) this.#left.push(r.seq);
    if (this.#b.serialPerKey) {
      const id = keyId(r.key);
      const q = this.#keys.get(id)!;
      q.shift();
      if (q.length > 0) this.#ready.push(q[0]!);
      else this.#keys.delete(id);
    }
    try {
      this.#env.guard(r, () => {
        if (r.error !== undefined) {
          const e = r.error;
          throw e instanceof OperatorError || isSluiceFault(e)
            ? e
            : new OperatorError(this.#env.node.name, e, this.#env.node.onError);
        }
        try {
          this.#b.apply(r, r.result);
        } catch (e) {
          // Downstream operators name their own errors; what apply itself throws is this one's.
          throw e instanceof OperatorError || isSluiceFault(e)
            ? e
            : new OperatorError(this.#env.node.name, e, this.#env.node.onError);
        }
      });
    } catch (e) {
      this.close();
      this.#env.fail(e);
      return;
    }
    this.#env.observe('done', performance.now() - r.enteredAt, this);
    this.#env.changed();
  }

  /**
   * At a checkpoint's start (before its changelog records are made): the records in the stage
   * go into the stage's store, those that left since the last one out of it.
   */
  #snapshot(): void {
    const { st, store } = this.#env;
    let writes = 0;
    for (const seq of this.#left) {
      st.cache.delete(store, seqKey(seq));
      writes++;
    }
    this.#left = [];
    for (const r of this.#all.values()) {
      if (r.persisted) continue;
      const k = seqKey(r.seq);
      const bytes = encodeInFlight(r, this.#env.node.name);
      st.cache.set(store, k, bytes, bytes.length + 64);
      r.persisted = true;
      writes++;
    }
    if (writes > 0) st.noteWrite();
  }

  /**
   * The task resets or closes: the records in the stage are dropped here (what they would have
   * done comes from the last checkpoint's store on the next start), their late results ignored.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    for (const r of this.#all.values()) this.#env.budget.bytes -= r.bytes;
    this.#all.clear();
    this.#keys.clear();
    this.#ready = [];
    this.#readyHead = 0;
    this.#env.changed();
  }
}
