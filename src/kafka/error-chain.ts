/**
 * Whether `test` holds for `e` or for an error it wraps. kafkajs wraps broker errors (a
 * non-retriable or an exhausted retry) with the original as `cause` or `originalError`, and an
 * aggregate keeps its parts in `errors`; cycles are walked once.
 */
export function someInChain(
  e: unknown,
  test: (x: { name?: unknown; type?: unknown; code?: unknown }) => boolean,
): boolean {
  const seen = new Set<unknown>();
  const walk = (start: unknown): boolean => {
    for (let cur = start; cur !== null && typeof cur === 'object' && !seen.has(cur); ) {
      seen.add(cur);
      const x = cur as {
        name?: unknown;
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

/** kafkajs's names for a request that got no answer: it timed out, or its connection failed. */
const UNANSWERED_NAMES = [
  'KafkaJSConnectionError',
  'KafkaJSConnectionClosedError',
  'KafkaJSRequestTimeoutError',
];
/** kafkajs's names, broker error types and socket codes for "no broker to talk to right now". */
const UNREACHABLE_NAMES = new Set([
  'KafkaJSGroupCoordinatorNotFound',
  'KafkaJSBrokerNotFound',
  ...UNANSWERED_NAMES,
  'KafkaJSNoBrokerAvailableError',
]);
const UNREACHABLE_TYPES = new Set([
  'GROUP_COORDINATOR_NOT_AVAILABLE',
  'NOT_COORDINATOR_FOR_GROUP',
  'GROUP_LOAD_IN_PROGRESS',
]);
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENOTFOUND',
]);

/**
 * Whether `e` says only that the brokers (or the group's coordinator) could not be reached or
 * were moving: a broker restart or outage, which a retry outlives, not a fault of the request.
 */
export function isBrokerUnreachable(e: unknown): boolean {
  return someInChain(
    e,
    (x) =>
      (typeof x.name === 'string' && UNREACHABLE_NAMES.has(x.name)) ||
      (typeof x.type === 'string' && UNREACHABLE_TYPES.has(x.type)) ||
      (typeof x.code === 'string' && UNREACHABLE_CODES.has(x.code)),
  );
}

/**
 * Whether `e` (or what it wraps) says that a request got no answer: it timed out, or its
 * connection failed or closed. The broker may still handle it later.
 */
export function mayBeUnanswered(e: unknown): boolean {
  return someInChain(e, (x) => typeof x.name === 'string' && UNANSWERED_NAMES.includes(x.name));
}
