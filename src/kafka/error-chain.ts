/**
 * Whether `test` holds for `e` or for an error it wraps. kafkajs wraps broker errors (a
 * non-retriable or an exhausted retry) with the original as `cause` or `originalError`, and an
 * aggregate keeps its parts in `errors`; cycles are walked once.
 */
export function someInChain(e: unknown, test: (x: { type?: unknown; code?: unknown }) => boolean): boolean {
  const seen = new Set<unknown>();
  const walk = (start: unknown): boolean => {
    for (let cur = start; cur !== null && typeof cur === 'object' && !seen.has(cur); ) {
      seen.add(cur);
      const x = cur as {
        type?: unknown;
        code?: unknown;
        cause?: unknown;
        originalError?: unknown;
        errors?: unknown;
      };
      if (test(x)) return true;
      if (Array.isArray(x.errors) && x.errors.some(walk)) return true;
      cur = x.cause ?? x.originalError;
    }
    return false;
  };
  return walk(e);
}
