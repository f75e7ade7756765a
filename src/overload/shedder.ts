import type { Headers, InRecord } from '../kafka/types.js';

export const OVERFLOW_HEADERS = {
  topic: 'sluice.source.topic',
  partition: 'sluice.source.partition',
  offset: 'sluice.source.offset',
  shedFraction: 'sluice.shed.fraction',
  /** The record's own timestamp (the overflow topic's records carry the time they were written). */
  timestamp: 'sluice.source.timestamp',
} as const;

/** Shed records are counted under one of these reasons (`sluice_records_shed_total{reason}`). */
export type ShedReason = 'random' | 'priority';

export interface ShedderOptions {
  /** `shed` or `divert` shed; `backpressure` never does (p stays 0). */
  mode: 'backpressure' | 'shed' | 'divert';
  placement: 'source' | 'operator';
  drop: 'random' | 'priority';
  overflowTopic: string;
}

export interface TaskCounts {
  shed: number;
  processed: number;
  busyMs: number;
  chainMs: number;
  batches: number;
  handled: number;
}

/**
 * The drop decisions of one task. The controller sets `p` once per evaluation; the task's hot loop
 * reads it (one property read per batch when nothing is shed). Counters are plain numbers that
 * the controller collects and resets, so the hot path never touches prom-client.
 *
 * Priority drops keep a window of the last priorities seen at the `.shed()` points, and drop
 * below the p-quantile of that window: records with a priority under the threshold always, those
 * equal to it with the probability that makes the total fraction p (so discrete priorities such
 * as 0/1/2 are shed exactly in proportion).
 */
export class TaskShedder {
  readonly mode: ShedderOptions['mode'];
  readonly atSource: boolean;
  readonly divert: boolean;
  readonly byPriority: boolean;
  readonly overflowTopic: string;
  /** The applied shed fraction, 0..1. */
  p = 0;
  /** Records shed since the controller last collected. */
  shed = 0;
  /** Records processed (not shed at the source) and busy milliseconds, since last collected. */
  processed = 0;
  busyMs = 0;
  /**
   * Busy milliseconds of the task's async stages (each record's time in a stage over its
   * concurrency): the stage and the synchronous chain run at once, so the busier bounds C.
   */
  asyncBusyMs = 0;
  /** Batches handed to the task since last collected (the record loop counts them). */
  batches = 0;
  readonly #window = new Float64Array(2048);
  #filled = 0;
  #next = 0;
  #threshold = Number.NEGATIVE_INFINITY;
  #equalDrop = 0;

  constructor(o: ShedderOptions) {
    this.mode = o.mode;
    this.atSource = o.placement === 'source';
    this.divert = o.mode === 'divert';
    this.byPriority = o.drop === 'priority';
    this.overflowTopic = o.overflowTopic;
  }

  get reason(): ShedReason {
    return this.byPriority ? 'priority' : 'random';
  }

  /** Sets the fraction to shed from now on (ignored in backpressure mode). */
  setFraction(p: number): void {
    this.p = this.mode === 'backpressure' ? 0 : Math.min(1, Math.max(0, p));
    if (this.byPriority) this.#recomputeThreshold();
  }

  /** Random drop with probability p; counts what it drops. */
  dropRandom(): boolean {
    if (this.p > 0 && Math.random() < this.p) {
      this.shed++;
      return true;
    }
    return false;
  }

  /** Priority drop: remembers the priority, drops the lowest first; counts what it drops. */
  dropByPriority(priority: number): boolean {
    const w = this.#window;
    w[this.#next] = priority;
    this.#next = (this.#next + 1) % w.length;
    if (this.#filled < w.length) this.#filled++;
    if (this.p <= 0) return false;
    if (this.#filled < 32) return this.dropRandom();
    let drop = false;
    if (this.p >= 1 || priority < this.#threshold) drop = true;
    else if (priority === this.#threshold) drop = Math.random() < this.#equalDrop;
    if (drop) this.shed++;
    return drop;
  }

  /** Threshold and tie-break probability for the current p over the window. */
  #recomputeThreshold(): void {
    const n = this.#filled;
    if (n === 0 || this.p <= 0) {
      this.#threshold = Number.NEGATIVE_INFINITY;
      this.#equalDrop = 0;
      return;
    }
    const sorted = this.#window.slice(0, n).sort();
    const target = this.p * n;
    const thr = sorted[Math.min(n - 1, Math.floor(target))]!;
    let lt = 0;
    let eq = 0;
    for (let i = 0; i < n; i++) {
      if (sorted[i]! < thr) lt++;
      else if (sorted[i] === thr) eq++;
    }
    this.#threshold = thr;
    this.#equalDrop = eq > 0 ? Math.min(1, Math.max(0, (target - lt) / eq)) : 0;
  }

  /** The overflow copy of an input record shed at the source: its bytes plus where it came from. */
  overflowHeaders(r: InRecord, topic: string, partition: number): Headers {
    const headers: Headers = { ...(r.headers ?? {}) };
    headers[OVERFLOW_HEADERS.topic] = topic;
    headers[OVERFLOW_HEADERS.partition] = String(partition);
    headers[OVERFLOW_HEADERS.offset] = r.offset;
    headers[OVERFLOW_HEADERS.shedFraction] = this.p.toFixed(3);
    headers[OVERFLOW_HEADERS.timestamp] = r.timestamp;
    return headers;
  }

  /**
   * Hands the counters to the controller and starts them again. `busyMs` is the busier of the
   * chain and the async stages (what bounds C); `chainMs` the synchronous chain's own time, on the
   * event loop; `handled` the data records the loop went through, shed at the source or not.
   */
  collect(): TaskCounts {
    const out: TaskCounts = {
      shed: this.shed,
      processed: this.processed,
      busyMs: Math.max(this.busyMs, this.asyncBusyMs),
      chainMs: this.busyMs,
      batches: this.batches,
      handled: this.processed + (this.atSource ? this.shed : 0),
    };
    this.shed = 0;
    this.processed = 0;
    this.busyMs = 0;
    this.asyncBusyMs = 0;
    this.batches = 0;
    return out;
  }
}
