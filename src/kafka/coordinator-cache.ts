/**
 * kafkajs 2.2.4 looks its coordinators up again before every transactional request: the
 * producer's `findTransactionCoordinator` and `sendOffsets` call `cluster.findGroupCoordinator`,
 * which sends a FindCoordinator request each time. A checkpoint's transaction
 * (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) thus made four FindCoordinator
 * round trips on top of its five requests, one after the other, each delaying the moment its
 * outputs become visible (bench/latency.ts, issue 19: 384 FindCoordinator for 94 checkpoints).
 *
 * Installed on each producer's own cluster (by the producer's send function, send-messages.ts),
 * this keeps the answer per coordinator type and key, as the Java clients do, until a request
 * to that broker fails in any way (NOT_COORDINATOR when the coordinator moved,
 * COORDINATOR_NOT_AVAILABLE, a closed or timed-out connection, or any other error but
 * CONCURRENT_TRANSACTIONS, which only the coordinator answers): the next
 * lookup then asks the cluster again, so kafkajs's retries of the failed request go to the
 * coordinator as it is then. Concurrent lookups of one coordinator share one request. A request
 * the broker refused because it is not (or not yet) the coordinator (NOT_COORDINATOR,
 * COORDINATOR_NOT_AVAILABLE: nothing was applied) is sent once more, to the coordinator looked up
 * anew: kafkajs retries neither AddOffsetsToTxn nor EndTxn, and before the cache a lookup right
 * before each request found the moved coordinator (a failed checkpoint resets its task).
 */

type Any = any;

const INSTALLED = Symbol('sluice.coordinatorCache');

/** Refused by a broker that is not the coordinator: the request had no effect. */
const MOVED = new Set([
  'NOT_COORDINATOR',
  'NOT_COORDINATOR_FOR_GROUP',
  'COORDINATOR_NOT_AVAILABLE',
  'GROUP_COORDINATOR_NOT_AVAILABLE',
]);
const moved = (e: Any) => e != null && (MOVED.has(e.type) || e.code === 15 || e.code === 16);

/**
 * CONCURRENT_TRANSACTIONS: the coordinator's own answer (it is still completing this
 * transactional id's last change), so it is the coordinator: kept, and the request is tried again
 * by its caller (send-messages.ts, producer.ts) after a few ms.
 */
const stillCoordinator = (e: Any) => e != null && (e.type === 'CONCURRENT_TRANSACTIONS' || e.code === 51);

/**
 * The broker, with every method call that throws or rejects dropping it from the cache (the
 * caller still gets the error), and a call refused as not the coordinator's sent once more
 * through `again` (the coordinator looked up anew).
 */
function watched(
  broker: Any,
  forget: () => void,
  again: (prop: string | symbol, args: unknown[]) => unknown,
): Any {
  if (broker === null || typeof broker !== 'object') return broker;
  return new Proxy(broker, {
    get(target, prop) {
      const v = target[prop];
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        let r: unknown;
        try {
          r = v.apply(target, args);
        } catch (e) {
          forget();
          throw e;
        }
        if (r === null || typeof (r as Promise<unknown>)?.then !== 'function') return r;
        return (r as Promise<unknown>).then(undefined, (e) => {
          if (stillCoordinator(e)) throw e;
          forget();
          if (!moved(e)) throw e;
          return again(prop, args);
        });
      };
    },
  });
}

/** Caches `cluster.findGroupCoordinator` on this cluster instance (once; a no-op without one). */
export function cacheCoordinators(cluster: Any): void {
  if (cluster === null || typeof cluster !== 'object' || cluster[INSTALLED]) return;
  const find = cluster.findGroupCoordinator;
  if (typeof find !== 'function') return;
  const known = new Map<string, Promise<Any>>();
  cluster[INSTALLED] = true;
  cluster.findGroupCoordinator = (args: { groupId: string; coordinatorType?: number }) => {
    const key = `${args.coordinatorType ?? 0}\u0000${args.groupId}`;
    const cached = known.get(key);
    if (cached) return cached;
    const forget = () => {
      if (known.get(key) === p) known.delete(key);
    };
    // Once, on the real broker looked up anew (not through the cache: a second refusal is the caller's).
    const again = (prop: string | symbol, callArgs: unknown[]) =>
      Promise.resolve(find.call(cluster, args)).then((b: Any) => b[prop](...callArgs));
    const p: Promise<Any> = Promise.resolve(find.call(cluster, args)).then((b: Any) =>
      watched(b, forget, again),
    );
    known.set(key, p);
    p.catch(forget);
    return p;
  };
}
