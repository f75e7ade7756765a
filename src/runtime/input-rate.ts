import type { WorkerMetrics } from '../ops/metrics.js';

/**
 * How many records a worker processes per second from each input partition, for the gauge
 * `sluice_input_rate`. This is the consumption rate (what the worker keeps up with); the arrival
 * rate (how fast producers append) comes from the log-end offsets, elsewhere.
 *
 * A 5 s window: long enough to smooth the bursts of fetch batches (one batch can carry a second
 * of input), short enough that a stall shows within seconds. The gauge is refreshed at most once a
 * second, from the worker's periodic timer, so the hot path only adds to a counter.
 */
const WINDOW_MS = 5000;
const REFRESH_MS = 1000;

interface Partition {
  topic: string;
  partition: string;
  total: number;
  /** [time, total] samples, oldest first, spanning at most the window. */
  samples: Array<[number, number]>;
  /** Records per second over the window, as of the last refresh. */
  rate?: number;
}

/** A partition this far behind (seconds of its input, and records) counts as a backlog ({@link InputRateMeter.behind}). */
export const BACKLOG_SECONDS = 1;
export const BACKLOG_RECORDS = 1000;

export class InputRateMeter {
  readonly #metrics: WorkerMetrics;
  readonly #app: string;
  readonly #parts = new Map<string, Partition>();
  #refreshed = 0;

  constructor(metrics: WorkerMetrics, app: string) {
    this.#metrics = metrics;
    this.#app = app;
  }

  /** Counts `n` records processed from one partition. */
  add(topic: string, partition: number, n: number, now = Date.now()): void {
    const id = `${topic}:${partition}`;
    let p = this.#parts.get(id);
    if (!p) {
      p = { topic, partition: String(partition), total: 0, samples: [[now, 0]] };
      this.#parts.set(id, p);
    }
    p.total += n;
  }

  /** Refreshes the gauges when a second has passed since the last refresh. */
  tick(now = Date.now()): void {
    if (now - this.#refreshed < REFRESH_MS) return;
    this.#refreshed = now;
    for (const p of this.#parts.values()) {
      p.samples.push([now, p.total]);
      while (p.samples.length > 2 && now - p.samples[1]![0] >= WINDOW_MS) p.samples.shift();
      const [t0, n0] = p.samples[0]!;
      const rate = now > t0 ? ((p.total - n0) * 1000) / (now - t0) : 0;
      p.rate = rate;
      this.#metrics.inputRate.set({ app: this.#app, topic: p.topic, partition: p.partition }, rate);
    }
  }

  /**
   * Behind its input: one of these partitions (`topic:partition`) stopped its last fetch short of
   * its high watermark (`lag`: the worker's lag per partition at its last fetch) by at least
   * {@link BACKLOG_SECONDS} of its processing rate (over the last seconds), and
   * {@link BACKLOG_RECORDS}. A task that keeps up fetches up to the high watermark, less what
   * arrived meanwhile: a fraction of a second.
   */
  behind(lag: ReadonlyMap<string, number>, partitions: readonly string[]): boolean {
    for (const id of partitions) {
      const n = lag.get(id) ?? 0;
      if (n >= BACKLOG_RECORDS && n >= (this.#parts.get(id)?.rate ?? 0) * BACKLOG_SECONDS) return true;
    }
    return false;
  }

  /** Forgets a partition this worker no longer owns (its series disappears). */
  remove(topic: string, partition: number): void {
    const p = this.#parts.get(`${topic}:${partition}`);
    if (!p) return;
    this.#parts.delete(`${topic}:${partition}`);
    this.#metrics.inputRate.remove({ app: this.#app, topic, partition: p.partition });
  }
}
