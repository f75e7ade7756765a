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
