import type { WorkerMetrics } from '../ops/metrics.js';
import type { TaskShedder } from '../overload/shedder.js';
import type { AsyncStageDeps } from './async-ops.js';
import type { AsyncBudget, AsyncStage, InFlight } from './async-stage.js';
import { deferred } from './deferred.js';

type Deferred = ReturnType<typeof deferred>;

/**
 * The async stages of one task (async-stage.ts): built at each compile of its operators, started
 * when it runs, dropped when it resets or closes; the task's view of them for backpressure,
 * checkpoints, metrics and /status.
 */
export interface TaskAsyncDeps {
  appId: string;
  taskId: string;
  metrics: WorkerMetrics;
  shedder: TaskShedder;
  budget: AsyncBudget;
  /** A stage's record failed past the error policy (a fault, or `fail`). */
  fail: (e: unknown) => void;
}

export class TaskAsyncStages {
  #stages: AsyncStage[] = [];
  /** Waiters for room and for empty stages; made only when someone waits (not per record). */
  #room: Deferred | undefined;
  #empty: Deferred | undefined;
  /** The in-flight gauge's last value: set at the task's tick, not per record. */
  #published = -1;
  readonly #d: TaskAsyncDeps;

  constructor(d: TaskAsyncDeps) {
    this.#d = d;
  }

  /** A fresh list for a compile (the stages of the previous one are closed first). */
  fresh(): AsyncStage[] {
    this.close();
    this.#stages = [];
    return this.#stages;
  }

  /** What a stage of this task is built with; `guard` is the record loop's (record-loop.ts). */
  deps(guard: (r: InFlight, apply: () => void) => void): AsyncStageDeps {
    const { appId, metrics, shedder, budget } = this.#d;
    return {
      budget,
      guard,
      fail: (e) => this.#d.fail(e),
      changed: () => {
        if (this.#empty !== undefined && this.size === 0) {
          this.#empty.resolve();
          this.#empty = undefined;
        }
        if (this.#room !== undefined && !this.backlogged) {
          this.#room.resolve();
          this.#room = undefined;
        }
      },
      observe: (outcome, ms, stage) => {
        const labels = { app: appId, operator: stage.name };
        if (outcome === 'timeout') metrics.asyncTimeouts.inc(labels);
        else if (outcome === 'retry') metrics.asyncRetries.inc(labels);
        else {
          metrics.asyncDuration.observe(labels, ms / 1000);
          // Overload: a stage that holds `concurrency` records at once for `ms` each is busy
          // ms / concurrency per record (its capacity, concurrency / latency, bounds the task's).
          shedder.asyncBusyMs += ms / stage.concurrency;
        }
      },
    };
  }

  get stages(): readonly AsyncStage[] {
    return this.#stages;
  }

  /** Records in the task's stages. */
  get size(): number {
    let n = 0;
    for (const s of this.#stages) n += s.size;
    return n;
  }

  /** Records per slice of a batch (the smallest stage's `concurrency`; 0: no stages, whole batches). */
  get chunk(): number {
    let c = 0;
    for (const s of this.#stages) c = c === 0 ? s.concurrency : Math.min(c, s.concurrency);
    return c;
  }

  /** Some stage is full (or the worker's byte bound reached): fetching waits. */
  get backlogged(): boolean {
    for (const s of this.#stages) if (s.backlogged) return true;
    return false;
  }

  /** Some stored record has left since the last checkpoint: the next one deletes it. */
  get dirty(): boolean {
    for (const s of this.#stages) if (s.dirty) return true;
    return false;
  }

  /** Settles when no stage is backlogged any more (or at the next change, to be checked again). */
  room(): Promise<void> {
    if (!this.backlogged) return Promise.resolve();
    this.#room ??= deferred();
    return this.#room.promise;
  }

  /** Settles when the stages hold no record (the test driver waits for that before a checkpoint). */
  drained(): Promise<void> {
    if (this.size === 0) return Promise.resolve();
    this.#empty ??= deferred();
    return this.#empty.promise;
  }

  start(): void {
    for (const s of this.#stages) s.start();
  }

  /** Sets the in-flight gauge (the task's tick calls it: once per tick, not per record). */
  publish(): void {
    if (this.#stages.length === 0 && this.#published <= 0) return;
    const size = this.size;
    if (size === this.#published) return;
    this.#published = size;
    this.#d.metrics.asyncInFlight.set({ app: this.#d.appId, task: this.#d.taskId }, size);
  }

  close(): void {
    for (const s of this.#stages) s.close();
    this.#d.metrics.asyncInFlight.remove({ app: this.#d.appId, task: this.#d.taskId });
    this.#published = -1;
    this.#room?.resolve();
    this.#room = undefined;
    this.#empty?.resolve();
    this.#empty = undefined;
  }
}
