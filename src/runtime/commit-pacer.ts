import { type EventLoopUtilization, performance } from 'node:perf_hooks';
import type { SluiceConfig } from '../config/schema.js';

/** What the pacer needs of a task: its input partitions, the time since its last checkpoint started. */
export interface Paced {
  readonly inputTopics: readonly string[];
  readonly partition: number;
  readonly sinceCheckpoint: number;
}

/**
 * When a task checkpoints. Always once `processing.commitIntervalMs` has passed since its last
 * checkpoint started (Kafka Streams' rule). Under exactly-once with one transaction per worker, whose
 * outputs become visible only at a commit, also sooner when the worker has time to spare: a task whose input is caught up (its last
 * fetch reached the end of each of its partitions) checkpoints once the interval × the event loop's
 * busy share, and at least `processing.minCommitIntervalMs`, has passed. A worker busy half of the
 * time commits about twice as often; a saturated one (busy near 1), or one behind on its input,
 * only on the interval, so the extra commits cost only time it would have spent idle.
 */
export class CommitPacer {
  readonly #interval: number;
  readonly #min: number;
  readonly #early: boolean;
  #elu: EventLoopUtilization = performance.eventLoopUtilization();
  /** The event loop's busy share, smoothed over the last few ticks; 1 until measured. */
  #busy = 1;

  readonly #lag: ReadonlyMap<string, number>;

  /** `lag`: each input partition's lag at its last fetch (`topic:partition`), kept by the worker. */
  constructor(processing: Readonly<SluiceConfig['processing']>, lag: ReadonlyMap<string, number>) {
    this.#lag = lag;
    this.#interval = processing.commitIntervalMs;
    this.#min = processing.minCommitIntervalMs;
    // One transaction per task (`task`) would multiply the extra commits by the tasks: interval only.
    const perWorker = processing.guarantee === 'exactly_once' && processing.transactions === 'worker';
    this.#early = perWorker && this.#min < this.#interval;
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

  /** The spacing of checkpoints for a caught-up task now (ms). */
  get spacing(): number {
    if (!this.#early) return this.#interval;
    return Math.min(this.#interval, Math.max(this.#min, this.#interval * this.#busy));
  }

  /** A checkpoint is due: a commit interval passed, or (caught up) the shorter spacing. */
  readonly due = (task: Paced): boolean => {
    const since = task.sinceCheckpoint;
    if (since >= this.#interval) return true;
    return this.#early && since >= this.spacing && this.caughtUp(task);
  };

  /** Every input partition of the task was read to its end at its last fetch (unknown: nothing behind). */
  caughtUp(task: Paced): boolean {
    for (const topic of task.inputTopics)
      if ((this.#lag.get(`${topic}:${task.partition}`) ?? 0) > 0) return false;
    return true;
  }
}
