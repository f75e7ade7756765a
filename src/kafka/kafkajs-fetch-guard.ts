/**
 * Two kafkajs 2.2.4 consumer methods wrapped so that a consumer's fetch positions
 * (fetch-positions.ts) also see what kafkajs does without a batch handler:
 * - `Runner#handleBatch`: a batch with nothing to hand over (transaction markers or aborted
 *   records only) is resolved by kafkajs itself, before any handler and without its stale check.
 *   The guard is asked first, and a batch it refuses (fetched before a seek) is dropped unresolved.
 * - `ConsumerGroup#recoverFromOffsetOutOfRange`: the position kafkajs-offset-reset.ts moves an
 *   out-of-range partition to (the log's start after retention) is told to the guard, so that the
 *   fetch from there is not taken for one made before a seek.
 * The guard is set on the consumer group object by `GroupConsumer` (consumer.ts); a kafkajs
 * consumer without one runs as before.
 */
import { replaceMethod } from './kafkajs-prototype.js';

export const FETCH_GUARD = Symbol('sluice fetch guard');

export interface FetchGuard {
  /** kafkajs moved the out-of-range position of a partition to `offset`. */
  reset(topic: string, partition: number, offset: string): void;
  /** A batch with no record to hand over, fetched from `fetchedOffset`: false drops it unresolved. */
  takeSkipped(topic: string, partition: number, fetchedOffset: string): boolean;
}

const handleBatchGuarded = replaceMethod('kafkajs/src/consumer/runner.js', 'handleBatch', {
  wrap: (original) =>
    async function (this: any, batch: any) {
      const guard: FetchGuard | undefined = this.consumerGroup?.[FETCH_GUARD];
      if (
        guard !== undefined &&
        this.running &&
        batch.isEmptyDueToFiltering() &&
        !guard.takeSkipped(batch.topic, batch.partition, String(batch.fetchedOffset))
      )
        return;
      return original.call(this, batch);
    },
});

const offsetResetTold = replaceMethod(
  'kafkajs/src/consumer/consumerGroup.js',
  'recoverFromOffsetOutOfRange',
  {
    wrap: (original) =>
      async function (this: any, e: { topic: string; partition: number }) {
        // kafkajs's own test, kept as it is: it retries the leader instead of resetting when the
        // fetch went to a follower. (2.2.4 stores objects there, so it always resets.)
        const viaFollower =
          typeof this.preferredReadReplicasPerTopicPartition?.[e.topic]?.[e.partition] === 'number';
        await original.call(this, e);
        const guard: FetchGuard | undefined = this[FETCH_GUARD];
        if (guard === undefined || viaFollower) return;
        let offset: string | undefined;
        try {
          offset = String(this.offsetManager.nextOffset(e.topic, e.partition));
        } catch {
          return; // untold: the guard's valve takes it after a few seeks back
        }
        guard.reset(e.topic, e.partition, offset);
      },
  },
);

/** Whether both are wrapped (kafkajs-preload.ts reports it). */
export const fetchGuardPatched: boolean = handleBatchGuarded && offsetResetTold;
