/**
 * Estimators of the overload model (docs/ARCHITECTURE.md, "Overload"): arrival rate λ from the
 * growth of log-end offsets, capacity C from records per busy second. Pure: the controller feeds
 * them samples, tests feed them numbers.
 */

/** An exponentially weighted moving average; `undefined` until the first sample. */
export class Ewma {
  #value: number | undefined;
  readonly #alpha: number;
  constructor(alpha: number) {
    if (!(alpha > 0 && alpha <= 1)) throw new RangeError(`EWMA weight must be in (0, 1], got ${alpha}`);
    this.#alpha = alpha;
  }
  get value(): number | undefined {
    return this.#value;
  }
  update(sample: number): number {
    this.#value = this.#value === undefined ? sample : this.#alpha * sample + (1 - this.#alpha) * this.#value;
    return this.#value;
  }
  set(v: number | undefined): void {
    this.#value = v;
  }
}

/**
 * λ of one partition: records per second by which its log-end offset grew between two polls.
 * The log end moves whether or not we keep up, so λ is the offered load, not our throughput.
 * A log end that moved backwards (topic recreated) restarts the estimate.
 */
export class ArrivalRate {
  #lastOffset: bigint | undefined;
  #lastAt = 0;
  readonly #ewma: Ewma;
  constructor(alpha: number) {
    this.#ewma = new Ewma(alpha);
  }
  get value(): number | undefined {
    return this.#ewma.value;
  }
  /** Feeds a log-end offset seen at `atMs`; returns the smoothed rate (records/s). */
  observe(logEnd: bigint, atMs: number): number | undefined {
    const prev = this.#lastOffset;
    const dt = (atMs - this.#lastAt) / 1000;
    if (prev !== undefined && logEnd < prev) {
      this.#lastOffset = logEnd;
      this.#lastAt = atMs;
      this.#ewma.set(undefined);
      return undefined;
    }
    if (prev === undefined || dt <= 0.05) {
      if (prev === undefined) {
        this.#lastOffset = logEnd;
        this.#lastAt = atMs;
      }
      return this.#ewma.value;
    }
    this.#lastOffset = logEnd;
    this.#lastAt = atMs;
    return this.#ewma.update(Number(logEnd - prev) / dt);
  }
}

/**
 * C of one operator chain: records processed per second of busy time (time spent inside the
 * task's synchronous processing of batches). Samples are taken only once enough busy time has
 * accumulated, so that a window with three records and a timer tick does not swing the estimate.
 */
export class Capacity {
  #records = 0;
  #busyMs = 0;
  readonly #ewma: Ewma;
  readonly #minBusyMs: number;
  constructor(alpha: number, minBusyMs = 20) {
    this.#ewma = new Ewma(alpha);
    this.#minBusyMs = minBusyMs;
  }
  get value(): number | undefined {
    return this.#ewma.value;
  }
  /** Adds what a task did since the last call. */
  observe(records: number, busyMs: number): number | undefined {
    this.#records += records;
    this.#busyMs += busyMs;
    if (this.#busyMs >= this.#minBusyMs && this.#records > 0) {
      this.#ewma.update(this.#records / (this.#busyMs / 1000));
      this.#records = 0;
      this.#busyMs = 0;
    }
    return this.#ewma.value;
  }
}

/** One evaluation interval of the worker's event loop, as the fit of `OutOfChainCost` reads it. */
export interface LoopInterval {
  /** Event-loop active milliseconds outside the operator chains (loop active − chains' busy). */
  outMs: number;
  /** Batches the record loop handed to the tasks. */
  batches: number;
  /** Data records the record loop handled (kept or shed at the source). */
  records: number;
}

export interface OutOfChainFit {
  /**
   * Milliseconds per interval: the controller's own offset polls, timers, heartbeats, scrapes.
   * Per interval, not per wall millisecond: a timer held up by a long batch fires once, late.
   */
  perInterval: number;
  /** Milliseconds per batch (a fetch round, its share of the checkpoints). */
  perBatch: number;
  /** Milliseconds per record (decoding the fetch response, encoding the produce request). */
  perRecord: number;
  /** Standard error of `perRecord`. */
  perRecordSe: number;
}

/**
 * The event loop's work outside the operator chains, split by least squares over a sliding window
 * of evaluation intervals into what comes once an interval, with batches and with records:
 * outMs ≈ perInterval + perBatch·batches + perRecord·records. Only the per-record part would
 * stay per record if the worker were saturated: a saturated worker's batches are as large as a
 * fetch allows, a shedding or lightly loaded one's are small and many, so charging the per-batch
 * work to the records (a flat ratio of loop time to chain time) would make C depend on the load.
 *
 * `fit()` is undefined when the window cannot tell the three apart: fewer than `minIntervals`
 * samples, a column that never varies independently of the others (a steady load: records per
 * interval about constant, so per record and per interval are one), or a per-record cost
 * whose standard error exceeds `maxRelError` of the record's whole cost (see `perRecordMs`).
 */
export class OutOfChainCost {
  readonly #window: LoopInterval[] = [];
  readonly #size: number;
  readonly #minIntervals: number;
  readonly #maxRelError: number;
  readonly #warmup: number;
  #warm = 0;
  constructor(size = 60, minIntervals = 10, maxRelError = 0.02, warmup = 5) {
    this.#size = size;
    this.#warmup = warmup;
    this.#minIntervals = minIntervals;
    this.#maxRelError = maxRelError;
  }

  /**
   * Adds an interval. The first `warmup` intervals with batches are left out: a starting worker
   * compiles its code paths and joins the group, so its loop time per batch is several times what
   * it settles to (263 ms for 13 batches against 105 ms for 51 later), and least squares would
   * fit that with a negative per-record cost.
   */
  observe(s: LoopInterval): void {
    if (!Number.isFinite(s.outMs) || !Number.isFinite(s.batches) || !Number.isFinite(s.records)) return;
    if (s.batches > 0 && this.#warm < this.#warmup) {
      this.#warm++;
      return;
    }
    this.#window.push(s);
    if (this.#window.length > this.#size) this.#window.shift();
  }

  /**
   * The per-record out-of-chain cost to charge a record whose chain costs `chainMsPerRecord`, or
   * undefined when the fit is not trustworthy: its standard error would move C by more than
   * `maxRelError`.
   */
  perRecordMs(chainMsPerRecord: number): number | undefined {
    const f = this.fit();
    if (!f || !(chainMsPerRecord > 0)) return undefined;
    // Slightly negative is noise around a per-record cost of about 0 (a 2 ms record's fetch and
    // produce work is within ±0.02 ms of it): 0 is then the least-squares answer under b ≥ 0.
    // More negative than a tenth of the record's chain time means the model does not fit.
    if (f.perRecord < -0.1 * chainMsPerRecord) return undefined;
    const b = Math.max(0, f.perRecord);
    return f.perRecordSe <= this.#maxRelError * (chainMsPerRecord + b) ? b : undefined;
  }

  /**
   * Least squares over the window, then again without the intervals whose residual is beyond
   * three robust standard deviations (1.4826 × the median absolute residual): a worker's first
   * intervals (compiling, joining the group) or a stall of the machine are one-off loop time
   * that would otherwise pull the split far off (a first interval with 770 ms of out-of-chain
   * time against a typical 100 ms turned the per-record cost negative).
   */
  fit(): OutOfChainFit | undefined {
    const all = this.#window;
    if (all.length < this.#minIntervals) return undefined;
    const first = solve(all);
    if (!first) return undefined;
    const res = all.map((s) => Math.abs(s.outMs - predict(first, s)));
    const sorted = [...res].sort((x, y) => x - y);
    const sd = 1.4826 * sorted[Math.floor(sorted.length / 2)]!;
    const kept = all.filter((_, k) => res[k]! <= 3 * sd);
    if (kept.length === all.length || kept.length < this.#minIntervals) return first;
    return solve(kept);
  }
}

function predict(f: OutOfChainFit, s: LoopInterval): number {
  return f.perInterval + f.perBatch * s.batches + f.perRecord * s.records;
}

function solve(w: readonly LoopInterval[]): OutOfChainFit | undefined {
  const n = w.length;
  if (n <= 3) return undefined;
  const rows = w.map((s) => [1, s.batches, s.records] as const);
  // Columns scaled to unit length, so that the conditioning test does not depend on units.
  const scale = [0, 1, 2].map((j) => Math.sqrt(rows.reduce((a, r) => a + r[j]! ** 2, 0)));
  if (scale.some((x) => !(x > 0))) return undefined;
  const m = [0, 1, 2].map((i) =>
    [0, 1, 2].map((j) => rows.reduce((a, r) => a + r[i]! * r[j]!, 0) / (scale[i]! * scale[j]!)),
  );
  const v = [0, 1, 2].map((i) => w.reduce((a, s, k) => a + rows[k]![i]! * s.outMs, 0) / scale[i]!);
  // Exactly collinear columns (no batches, or one per record) have no solution at all; nearly
  // collinear ones get a large standard error, which `perRecordMs` turns away.
  const inv = invert3(m);
  if (!inv) return undefined;
  const beta = [0, 1, 2].map(
    (i) => (inv[i]![0]! * v[0]! + inv[i]![1]! * v[1]! + inv[i]![2]! * v[2]!) / scale[i]!,
  );
  const f: OutOfChainFit = { perInterval: beta[0]!, perBatch: beta[1]!, perRecord: beta[2]!, perRecordSe: 0 };
  let rss = 0;
  for (const s of w) rss += (s.outMs - predict(f, s)) ** 2;
  f.perRecordSe = Math.sqrt(((rss / (n - 3)) * inv[2]![2]!) / scale[2]! ** 2);
  return f;
}

/**
 * The inverse of a 3×3 matrix with unit diagonal (a scaled normal matrix: its determinant is 1 for
 * orthogonal columns, 0 for collinear ones), or undefined when it is singular to rounding.
 */
function invert3(m: number[][]): number[][] | undefined {
  const [a, b, c] = m[0]!;
  const [, e, f] = m[1]!;
  const i = m[2]![2]!;
  const d = m[1]![0]!;
  const g = m[2]![0]!;
  const h = m[2]![1]!;
  const A = e! * i - f! * h;
  const B = -(d * i - f! * g);
  const C = d * h - e! * g;
  const det = a! * A + b! * B + c! * C;
  if (!(det > 1e-9)) return undefined;
  const D = -(b! * i - c! * h);
  const E = a! * i - c! * g;
  const F = -(a! * h - b! * g);
  const G = b! * f! - c! * e!;
  const H = -(a! * f! - c! * d);
  const I = a! * e! - b! * d;
  return [
    [A / det, D / det, G / det],
    [B / det, E / det, H / det],
    [C / det, F / det, I / det],
  ];
}
