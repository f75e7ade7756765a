/**
 * `work`'s value, or the error of `timedOut(ms)` once `ms` passed without it settling (the timer is
 * cleared either way). A `work` that loses still settles later; the race has handled it.
 */
export async function withTimeout<T>(
  work: Promise<T>,
  ms: number,
  timedOut: (ms: number) => Error,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut(ms)), Math.max(ms, 0));
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}
