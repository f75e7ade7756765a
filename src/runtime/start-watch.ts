import { withTimeout } from '../kafka/timeout.js';
import type { Logger } from '../ops/logger.js';

/** The steps of a task's start, in order (see `Task.#init`). */
export type StartStep = 'fence' | 'restore' | 'input offsets' | 'operators';

/** How often a task that is still starting says which step it waits on. */
export const START_REPORT_MS = 15_000;

/**
 * Watches one start of a task: while it runs, every `reportMs` it logs the step it waits on and
 * for how long, so a start that never finishes (its partitions held, nothing processed) names
 * its step in the worker's log instead of going silent after "state restored". The restore has
 * progress of its own to report and is slow by nature (info); any other step is a warning.
 */
export class StartWatch {
  step: StartStep = 'fence';
  readonly #started = Date.now();
  readonly #timer: NodeJS.Timeout;

  constructor(logger: Logger, progress: () => unknown, reportMs = START_REPORT_MS) {
    this.#timer = setInterval(() => {
      const at = { step: this.step, ms: Date.now() - this.#started, progress: progress() };
      if (this.step === 'restore') logger.info(at, 'task still starting');
      else logger.warn(at, 'task start is slow');
    }, reportMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

/** Runs one start under a {@link StartWatch}. */
export async function watchStart(
  logger: Logger,
  progress: () => unknown,
  start: (watch: StartWatch) => Promise<void>,
): Promise<void> {
  const watch = new StartWatch(logger, progress);
  try {
    await start(watch);
  } finally {
    watch.stop();
  }
}

/** A step of a task's start that did not finish in time (the start fails and is retried). */
export class StartStepTimeoutError extends Error {
  override name = 'StartStepTimeoutError';
}

/**
 * `p`, or a {@link StartStepTimeoutError} once `ms` passed without it settling. Bounds the broker
 * calls of a start after the restore: the kafkajs client retries for about a minute and then
 * fails, but a call that never answers would otherwise hold the task's partitions for good,
 * with the group none the wiser (the worker heartbeats meanwhile).
 */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return withTimeout(p, ms, () => new StartStepTimeoutError(`${what}: no answer in ${ms} ms`));
}
