import type { GroupMetadata } from './types.js';

/** Which producer of a transactional id a pin is for: its id and epoch (from InitProducerId). */
export interface ProducerIdentity {
  producerId: string;
  epoch: number;
}

/**
 * The group metadata each exactly-once v2 producer's transaction in flight commits its offsets
 * with, by transactional id. kafkajs's transactional manager calls `Broker#txnOffsetCommit`
 * without it (its `sendOffsets` knows only the group id); the patched method
 * (kafkajs-txn-v3.ts) looks it up here, so that kafkajs's own path, with its coordinator lookup
 * and retries, sends TxnOffsetCommit v3 for such a producer and v1 for every other one.
 *
 * Pinned by the worker's transactions (runtime/worker-transactions.ts) when a transaction starts,
 * from the generation its tasks were assigned in, **with the producer it starts on**. kafkajs's
 * `sendOffsets` retries its TxnOffsetCommit (a coordinator moved or unreachable) on its own, and
 * goes on after the checkpoint gave the transaction up and the worker threw that producer away.
 * Such a late request looked its metadata up at send time, so it could carry a later transaction's
 * generation (the worker rejoined meanwhile, and may no longer own the tasks whose offsets it
 * holds), or none once the worker's transactions closed (v1: the coordinator fences nothing).
 * Now one of another producer of the id, or of a retired id, is refused as a fenced producer's.
 */
const pins = new Map<string, { meta: GroupMetadata; producer: ProducerIdentity | undefined } | 'retired'>();

/**
 * The metadata `transactionalId`'s transactions commit offsets with from now on, and the producer
 * they go through (undefined: any producer of the id, where it cannot be known).
 */
export function pinTxnGroupMetadata(
  transactionalId: string,
  meta: GroupMetadata,
  producer: ProducerIdentity | undefined,
): void {
  pins.set(transactionalId, { meta, producer });
}

/** The id's transactions are over (the worker stopped): a late TxnOffsetCommit of it is refused. */
export function retireTxnGroupMetadata(transactionalId: string): void {
  pins.set(transactionalId, 'retired');
}

/** The metadata pinned for the id now, if any (diagnostics and tests). */
export function pinnedTxnGroupMetadata(transactionalId: string): GroupMetadata | undefined {
  const pin = pins.get(transactionalId);
  return pin === undefined || pin === 'retired' ? undefined : pin.meta;
}

/**
 * What a TxnOffsetCommit without member fields of this producer goes with: `none` for an id
 * never pinned (not a worker's: kafkajs's v1), the pinned metadata for the pinned producer, and
 * `stale` (with why) for any other producer of a pinned id, or any of a retired one.
 */
export function txnGroupMetadataFor(
  transactionalId: unknown,
  producerId: unknown,
  producerEpoch: unknown,
): { kind: 'none' } | { kind: 'pinned'; meta: GroupMetadata } | { kind: 'stale'; why: string } {
  const pin = typeof transactionalId === 'string' ? pins.get(transactionalId) : undefined;
  if (pin === undefined) return { kind: 'none' };
  if (pin === 'retired') return { kind: 'stale', why: `the transactions of ${transactionalId} are closed` };
  const p = pin.producer;
  if (p === undefined || (String(producerId) === p.producerId && producerEpoch === p.epoch))
    return { kind: 'pinned', meta: pin.meta };
  return {
    kind: 'stale',
    why: `producer ${String(producerId)} epoch ${String(producerEpoch)} of ${transactionalId} was replaced (the id's transactions go through producer ${p.producerId} epoch ${p.epoch})`,
  };
}
