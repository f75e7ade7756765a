import type { Logger } from '../ops/logger.js';

/**
 * Runs `fn` until it succeeds, with backoff (500 ms doubling, at most 10 s; longer when the error
 * carries a `retryAfterMs`, a server's Retry-After, kept up to 60 s), logging each failure as
 * "cannot <what> yet; retrying". Gives up (rethrows) on an error that is not `retriable`, or once
 * `stopping()` says the caller is going away.
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
      const wait = typeof asked === 'number' ? Math.max(delay, Math.min(asked, 60_000)) : delay;
      logger.warn({ err: e, attempt, retryInMs: wait }, `cannot ${what} yet; retrying`);
      await new Promise((r) => setTimeout(r, wait));
      delay = Math.min(delay * 2, 10_000);
    }
  }
}
