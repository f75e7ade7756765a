import type { Logger } from '../ops/logger.js';

/**
 * Runs `fn` until it succeeds, with backoff (500 ms doubling, at most 10 s), logging each failure
 * as "cannot <what> yet; retrying". Gives up (rethrows) on an error that is not `retriable`, or
 * once `stopping()` says the caller is going away.
 */
export async function retrying<T>(
  logger: Logger,
  what: string,
  fn: () => Promise<T>,
  opts: { retriable?: ((e: unknown) => boolean) | undefined; stopping: () => boolean },
): Promise<T> {
  let delay = 500;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (!(opts.retriable?.(e) ?? true) || opts.stopping()) throw e;
      logger.warn({ err: e, attempt, retryInMs: delay }, `cannot ${what} yet; retrying`);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10_000);
    }
  }
}
