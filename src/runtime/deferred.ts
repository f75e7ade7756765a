/** A promise with its settle functions, and no unhandled rejection of its own. */
export function deferred(): { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void } {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/** `p`'s value, or 'tick' after a second (the timer is cleared either way: none piles up). */
export async function withinSecond<T>(p: Promise<T>): Promise<T | 'tick'> {
  let timer: NodeJS.Timeout | undefined;
  const tick = new Promise<'tick'>((r) => {
    timer = setTimeout(() => r('tick'), 1000);
  });
  try {
    return await Promise.race([p, tick]);
  } finally {
    clearTimeout(timer);
  }
}
