import type { Logger } from '../ops/logger.js';

/**
 * A server's `Retry-After` (an error's `retryAfterMs`) is kept up to this long: a server that asked
 * for an hour may be back sooner.
 */
export const RETRY_AFTER_MAX_MS = 60_000;

/** The wait an error asks for (a server's Retry-After, its `retryAfterMs`), kept up to {@link RETRY_AFTER_MAX_MS}. */
export function askedWaitMs(e: unknown): number | undefined {
  const asked = (e as { retryAfterMs?: unknown } | null)?.retryAfterMs;
  return typeof asked === 'number' ? Math.min(asked, RETRY_AFTER_MAX_MS) : undefined;
}

/** Waits `ms` in steps of at most 100 ms, ending early once `stopping()`: true when cut short. */
export async function waitUnless(ms: number, stopping: () => boolean): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (stopping()) return true;
    await new Promise((r) => setTimeout(r, Math.min(100, until - Date.now())));
  }
  return stopping();
}

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
      const wait = Math.max(delay, askedWaitMs(e) ?? 0);
      logger.warn({ err: e, attempt, retryInMs: wait }, `cannot ${what} yet; retrying`);
      if (await waitUnless(wait, opts.stopping)) throw e;
      delay = Math.min(delay * 2, 10_000);
    }
  }
}
