import { createRequire } from 'node:module';

/**
 * A fix for kafkajs 2.2.4's read_committed filter, installed before kafkajs loads.
 *
 * kafkajs drops the records of aborted transactions in `filterAbortedMessages`, walking the
 * fetched records and "entering" the next aborted transaction of the fetch response once a record's
 * offset reaches its first offset. It assumes the broker lists aborted transactions by first
 * offset, but the broker lists them in the order they were aborted (its transaction index). When a
 * transaction that began later was aborted first (two task producers writing one partition, both
 * aborted after a worker was SIGKILLed), kafkajs enters neither in time and hands the records of
 * the one that began first to a read_committed reader. Seen in `bench/dlq-fuzz.ts`: DLQ batch
 * 5665–5682 of producer 259, ABORT marker at 6362, listed after producer 257's transaction that
 * began at 5699 and was aborted at 6361; kafkajs returned the 18 records, Kafka's own console
 * consumer did not. The same would hold for a worker reading a repartition topic.
 *
 * This version sorts the aborted transactions by first offset and enters every one whose first
 * offset was reached, as the Java consumer does (a priority queue by first offset).
 */
interface Txn {
  producerId: string | number | bigint;
  firstOffset: string | number | bigint;
}
interface Msg {
  key?: Buffer | null;
  offset: string;
  isControlRecord?: boolean;
  batchContext: { producerId: string | number | bigint; inTransaction: boolean; isControlBatch?: boolean };
}

/** The control record type of a transaction's ABORT marker (COMMIT is 1). */
const ABORT = 0;

/**
 * An ABORT marker: a record of a control batch (the batch attributes' control bit, which kafkajs
 * decodes as `batchContext.isControlBatch` and copies to `isControlRecord`) whose key, an int16
 * version followed by an int16 type, has type 0. A data record whose key happens to be the bytes
 * 00 00 00 00 is not one.
 */
export function isAbortMarker(m: Pick<Msg, 'key' | 'isControlRecord' | 'batchContext'>): boolean {
  if (m.isControlRecord !== true && m.batchContext.isControlBatch !== true) return false;
  const key = m.key;
  if (key == null || key.length < 4) return false;
  return key.readInt16BE(2) === ABORT;
}

/** kafkajs's contract: the messages of one fetched partition minus those of aborted transactions. */
export function filterAbortedMessages({
  messages,
  abortedTransactions,
}: {
  messages: Msg[];
  abortedTransactions?: Txn[] | null;
}): Msg[] {
  if (!abortedTransactions || abortedTransactions.length === 0) return messages;
  const pending = abortedTransactions
    .map((t) => ({ producerId: String(t.producerId), first: BigInt(String(t.firstOffset)) }))
    .sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0));
  const active = new Set<string>();
  let next = 0;
  return messages.filter((m) => {
    const offset = BigInt(m.offset);
    while (next < pending.length && offset >= pending[next]!.first) active.add(pending[next++]!.producerId);
    const producerId = String(m.batchContext.producerId);
    if (isAbortMarker(m)) {
      active.delete(producerId);
      return true;
    }
    return !(active.has(producerId) && m.batchContext.inTransaction);
  });
}

const require = createRequire(import.meta.url);
const FILTER = require.resolve('kafkajs/src/consumer/filterAbortedMessages.js');
const BATCH = require.resolve('kafkajs/src/consumer/batch.js');

/**
 * True when kafkajs's Batch uses the filter above. False only if kafkajs's consumer was loaded
 * before this module: every src/kafka module that loads kafkajs imports
 * kafkajs-preload.ts, and with it this one, first.
 */
export const abortedFilterInstalled: boolean = (() => {
  const batchLoadedBefore = require.cache[BATCH] !== undefined;
  require(FILTER);
  require.cache[FILTER]!.exports = filterAbortedMessages;
  return !batchLoadedBefore;
})();
