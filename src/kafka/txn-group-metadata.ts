import type { GroupMetadata } from './types.js';

/**
 * The group metadata each exactly-once v2 producer's transaction in flight commits its offsets
 * with, by transactional id. kafkajs's transactional manager calls `Broker#txnOffsetCommit`
 * without it (its `sendOffsets` knows only the group id); the patched method
 * (kafkajs-txn-v3.ts) looks it up here, so that kafkajs's own path, with its coordinator lookup
 * and retries, sends TxnOffsetCommit v3 for such a producer and v1 for every other one.
 *
 * Set by the worker's transactions (runtime/worker-transactions.ts) when a transaction starts,
 * from the generation its tasks were assigned in; cleared when the producer closes.
 */
export const txnGroupMetadata = new Map<string, GroupMetadata>();
