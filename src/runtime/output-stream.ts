import type { TopicRecords, WrittenOffsets } from '../kafka/producer.js';
import type { TaskProgress } from './task-progress.js';

/**
 * A task's outputs go out as the batches that made them are processed (`Task.process`), not all
 * at its next checkpoint.
 *
 * At-least-once: each send is visible once answered, one produce round trip after its batch
 * instead of up to a commit interval later (issue 19: p50 60 ms at 25 % load, most of it the
 * wait for the checkpoint). Exactly-once: the sends go into the task's open transaction (`hold`:
 * they count as written only when it commits), so that the checkpoint's commit does not wait for
 * the Produce of a whole interval's outputs (issue 19: a checkpoint took 18 ms at p50 and 90 ms at
 * p99 at half capacity, 5 ms at p50 at a tenth); they pause while a checkpoint commits (`paused`):
 * what the task makes meanwhile belongs to the next transaction.
 *
 * One queue per task, in order: every send starts once the one before it has been answered, the
 * checkpoint's own send (the outputs since the last early one, the changelog records) included,
 * so a partition receives the task's records in the order they were made, and the checkpoint
 * commits its input offsets only after every output of the records they cover is written
 * (acks=all). While a send is in flight, outputs collect and go in one send when it is answered.
 *
 * A failed send fails every later send of the queue, the next checkpoint's included: that
 * checkpoint commits no offsets and the task resets to its last one (the records are read and
 * their outputs sent again: at-least-once allows it; exactly-once aborts the transaction they were
 * in). A reset clears the task's progress (`TaskProgress.cleared`), which starts a new run: a
 * failure of an earlier run fails nothing pushed after it, though its sends are still waited for
 * (the order holds across the reset).
 */
export class OutputStream {
  readonly #send: (records: TopicRecords) => Promise<WrittenOffsets>;
  readonly #sent: (outputs: TopicRecords) => void;
  readonly #progress: Pick<TaskProgress, 'collector' | 'cleared'>;
  readonly #paused: () => boolean;
  readonly #minRecords: number;
  readonly #hold: boolean;
  #tail: Promise<unknown> = Promise.resolve();
  #queued = 0;
  #failure: { run: number; error: unknown } | undefined;
  /** Exactly-once: the outputs of answered sends, by run, until their transaction commits. */
  #held: Array<{ run: number; outputs: TopicRecords }> = [];

  constructor(opts: {
    send: (records: TopicRecords) => Promise<WrittenOffsets>;
    /** Called with the outputs (not changelog records) of every send that was answered (not held). */
    sent: (outputs: TopicRecords) => void;
    /** The task's progress: {@link flush} takes its collector's outputs. */
    progress: Pick<TaskProgress, 'collector' | 'cleared'>;
    /** While true, {@link flush} sends nothing (a checkpoint commits). */
    paused?: () => boolean;
    /** {@link flush} waits until this many outputs have collected. */
    minRecords?: number;
    /** Keep the answered sends' outputs for {@link takeHeld} instead of passing them to `sent`. */
    hold?: boolean;
  }) {
    this.#send = opts.send;
    this.#sent = opts.sent;
    this.#progress = opts.progress;
    this.#paused = opts.paused ?? (() => false);
    this.#minRecords = opts.minRecords ?? 1;
    this.#hold = opts.hold === true;
  }

  /**
   * Settles once every send pushed so far was answered; rejects when one of them, of the current
   * run, failed (exactly-once: the checkpoint must not commit the transaction then). Undefined
   * when there is nothing to wait for (the checkpoint goes on without a turn of the event loop).
   */
  drained(): Promise<void> | undefined {
    const run = this.#progress.cleared;
    if (!this.busy && this.#failure?.run !== run) return undefined;
    return this.#tail.then(() => {
      if (this.#failure?.run === run) throw this.#failure.error;
    });
  }

  /** The held outputs of `run` (those of earlier runs were in aborted transactions), and forgets all. */
  takeHeld(run: number): TopicRecords[] {
    const out = this.#held.filter((h) => h.run === run).map((h) => h.outputs);
    this.#held = [];
    return out;
  }

  /** A send is queued or in flight. */
  get busy(): boolean {
    return this.#queued > 0;
  }

  /**
   * Sends the outputs collected so far, unless a send is on its way: then they go when it is
   * answered (or with the checkpoint). A failure is the next checkpoint's.
   */
  flush(): void {
    const collector = this.#progress.collector;
    if (this.busy || collector.count < this.#minRecords || this.#paused()) return;
    this.push(collector.drain()).then(
      () => this.flush(),
      () => undefined,
    );
  }

  /**
   * Sends `records` after everything pushed before; `outputs` is the part of them that is the
   * task's outputs (for the metrics). Rejects when this or an earlier send of the run failed.
   */
  push(records: TopicRecords, outputs: TopicRecords = records): Promise<WrittenOffsets> {
    const run = this.#progress.cleared;
    this.#queued++;
    const p = this.#tail.then(() => {
      if (this.#failure?.run === run) throw this.#failure.error;
      return this.#send(records);
    });
    this.#tail = p.then(
      () => undefined,
      () => undefined,
    );
    return p.then(
      (w) => {
        this.#queued--;
        if (this.#hold) this.#held.push({ run, outputs });
        else this.#sent(outputs);
        return w;
      },
      (e) => {
        this.#queued--;
        if (this.#failure?.run !== run) this.#failure = { run, error: e };
        throw e;
      },
    );
  }
}
