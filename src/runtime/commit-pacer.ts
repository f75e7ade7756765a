import { type EventLoopUtilization, performance } from 'node:perf_hooks';
import type { SluiceConfig } from '../config/schema.js';

/** What the pacer needs of a task: the time since its last checkpoint started. */
export interface Paced {
  readonly sinceCheckpoint: number;
}

/**
 * When a task checkpoints. Always once `processing.commitIntervalMs` has passed since its last
 * checkpoint started (Kafka Streams' rule). Under exactly-once with one transaction per worker, whose
 * outputs become visible only at a commit, also sooner when the worker has time to spare: when every
 * input partition of the worker was read to its end at its last fetch, a task checkpoints once the
 * interval × the event loop's busy share has passed, since its own last checkpoint and since the
 * worker's last early one, and never sooner than `processing.minCommitIntervalMs` nor a fifth of
 * the interval. A worker busy half of the time commits about twice as often; a saturated one, or one
 * behind on its input, only on the interval, so the extra commits cost only time it would have
 * spent idle. The busy share is the main thread's: work on other threads (RocksDB's) and a slow
 * broker do not count in it.
 */
export class CommitPacer {
  readonly #interval: number;
  readonly #floor: number;
  readonly #early: boolean;
  readonly #lag: ReadonlyMap<string, number>;
  #elu: EventLoopUtilization = performance.eventLoopUtilization();
  /** The event loop's busy share, smoothed over the last few ticks; 1 until measured. */
  #busy = 1;
  /** When the pacer last let a checkpoint go early (the worker's, not a task's). */
  #lastEarly = 0;

  /** `lag`: each input partition's lag at its last fetch (`topic:partition`), kept by the worker. */
  constructor(processing: Readonly<SluiceConfig['processing']>, lag: ReadonlyMap<string, number>) {
    this.#lag = lag;
    this.#interval = processing.commitIntervalMs;
    this.#floor = Math.max(processing.minCommitIntervalMs, this.#interval / 5);
    // One transaction per task (`task`) would multiply the extra commits by the tasks: interval only.
    const perWorker = processing.guarantee === 'exactly_once' && processing.transactions === 'worker';
    this.#early = perWorker && this.#floor < this.#interval;
  }

  /** The worker's tick, which also checks for due checkpoints: every half interval, at least 10 ms. */
  get tickMs(): number {
    return Math.max(10, Math.floor(this.#interval / 2));
  }

  /** On the worker's tick: the busy share since the last one (a third of it each time). */
  tick(): void {
    const now = performance.eventLoopUtilization();
    const d = performance.eventLoopUtilization(now, this.#elu);
    this.#elu = now;
    if (d.idle + d.active > 0) this.#busy += (d.utilization - this.#busy) / 3;
  }

  /** The spacing of checkpoints for a caught-up worker now (ms). */
  get spacing(): number {
    if (!this.#early) return this.#interval;
    return Math.min(this.#interval, Math.max(this.#floor, this.#interval * this.#busy));
  }

  /** A checkpoint is due: a commit interval passed, or (caught up) the shorter spacing. */
  readonly due = (task: Paced): boolean => {
    const since = task.sinceCheckpoint;
    if (since >= this.#interval) return true;
    if (!this.#early) return false;
    const spacing = this.spacing;
    const now = Date.now();
    if (since < spacing || now - this.#lastEarly < spacing || !this.#caughtUp()) return false;
    this.#lastEarly = now;
    return true;
  };

  /**
   * Every input partition of the worker was read to its end at its last fetch (one transaction
   * commits all of its tasks, so one task behind keeps them all on the interval).
   */
  #caughtUp(): boolean {
    for (const lag of this.#lag.values()) if (lag > 0) return false;
    return true;
  }
}
