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
 * COORDINATOR_NOT_AVAILABLE, a closed or timed-out connection, or any other error): the next
 * lookup then asks the cluster again, so kafkajs's retries of the failed request go to the
 * coordinator as it is then. Concurrent lookups of one coordinator share one request.
 */

type Any = any;

const INSTALLED = Symbol('sluice.coordinatorCache');

/**
 * The broker, with every method call that throws or rejects dropping `key` from the cache
 * (the caller still gets the error).
 */
function watched(broker: Any, forget: () => void): Any {
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
        if (r !== null && typeof (r as Promise<unknown>)?.then === 'function')
          (r as Promise<unknown>).then(undefined, forget);
        return r;
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
    const p: Promise<Any> = Promise.resolve(find.call(cluster, args)).then((b: Any) => watched(b, forget));
    known.set(key, p);
    p.catch(forget);
    return p;
  };
}
