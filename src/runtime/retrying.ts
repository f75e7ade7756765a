import type { Logger } from '../ops/logger.js';

/**
 * A server's `Retry-After` (an error's `retryAfterMs`) is kept up to this long: a server that asked
 * for an hour may be back sooner.
 */
export const RETRY_AFTER_MAX_MS = 60_000;

/**
 * Runs `fn` until it succeeds, with backoff (500 ms doubling, at most 10 s; longer when the error
 * carries a `retryAfterMs`, up to {@link RETRY_AFTER_MAX_MS}), logging each failure as "cannot
 * <what> yet; retrying". Gives up (rethrows) on an error that is not `retriable`, or once
 * `stopping()` says the caller is going away (checked every 100 ms of a wait).
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
      const asked = (e as { retryAfterMs?: unknown } | null)?.retryAfterMs;
      const wait = typeof asked === 'number' ? Math.max(delay, Math.min(asked, RETRY_AFTER_MAX_MS)) : delay;
      logger.warn({ err: e, attempt, retryInMs: wait }, `cannot ${what} yet; retrying`);
      const until = Date.now() + wait;
      while (Date.now() < until) {
        await new Promise((r) => setTimeout(r, Math.min(100, until - Date.now())));
        if (opts.stopping()) throw e;
      }
      delay = Math.min(delay * 2, 10_000);
    }
  }
}
