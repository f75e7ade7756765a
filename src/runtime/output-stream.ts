import type { TopicRecords, WrittenOffsets } from '../kafka/producer.js';
import type { TaskProgress } from './task-progress.js';

/**
 * At-least-once: a task's outputs go out as soon as the batch that made them is processed
 * (`Task.process`), not at its next checkpoint, so they are visible one produce round trip after
 * their batch instead of waiting up to a commit interval (issue 19: p50 60 ms at 25 % load, most
 * of it the wait for the checkpoint). Exactly-once cannot: its outputs are visible only when the
 * checkpoint's transaction commits.
 *
 * One queue per task, in order: every send starts once the one before it has been answered, the
 * checkpoint's own send (the outputs since the last early one, the changelog records) included,
 * so a partition receives the task's records in the order they were made, and the checkpoint
 * commits its input offsets only after every output of the records they cover is written
 * (acks=all). While a send is in flight, outputs collect and go in one send when it is answered.
 *
 * A failed send fails every later send of the queue, the next checkpoint's included: that
 * checkpoint commits no offsets and the task resets to its last one (the records are read and
 * their outputs sent again, as at-least-once allows). A reset clears the task's progress
 * (`TaskProgress.cleared`), which starts a new run: a failure of an earlier run fails nothing
 * pushed after it, though its sends are still waited for (the order holds across the reset).
 */
export class OutputStream {
  readonly #send: (records: TopicRecords, early: boolean) => Promise<WrittenOffsets>;
  readonly #sent: (outputs: TopicRecords) => void;
  readonly #progress: Pick<TaskProgress, 'collector' | 'cleared'>;
  #tail: Promise<unknown> = Promise.resolve();
  #queued = 0;
  #failure: { run: number; error: unknown } | undefined;

  constructor(opts: {
    /** `early`: outputs sent before the checkpoint (flush), which may linger while their task is behind. */
    send: (records: TopicRecords, early: boolean) => Promise<WrittenOffsets>;
    /** Called with the outputs (not changelog records) of every send that was answered. */
    sent: (outputs: TopicRecords) => void;
    /** The task's progress: {@link flush} takes its collector's outputs. */
    progress: Pick<TaskProgress, 'collector' | 'cleared'>;
  }) {
    this.#send = opts.send;
    this.#sent = opts.sent;
    this.#progress = opts.progress;
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
    if (this.busy || collector.count === 0) return;
    const early = collector.drain();
    this.push(early, early, true).then(
      () => this.flush(),
      () => undefined,
    );
  }

  /**
   * Sends `records` after everything pushed before; `outputs` is the part of them that is the
   * task's outputs (for the metrics). Rejects when this or an earlier send of the run failed.
   */
  push(records: TopicRecords, outputs: TopicRecords = records, early = false): Promise<WrittenOffsets> {
    const run = this.#progress.cleared;
    this.#queued++;
    const p = this.#tail.then(() => {
      if (this.#failure?.run === run) throw this.#failure.error;
      return this.#send(records, early);
    });
    this.#tail = p.then(
      () => undefined,
      () => undefined,
    );
    return p.then(
      (w) => {
        this.#queued--;
        this.#sent(outputs);
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
