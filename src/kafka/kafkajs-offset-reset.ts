/**
 * kafkajs 2.2.4 answers a fetch refused with OFFSET_OUT_OF_RANGE (a position past the log's end
 * after a leader change, or below its start after retention) by committing the default offset
 * (`OffsetManager#setDefaultOffset`: an OffsetCommit of -2, "earliest", through the group), then
 * fetching from it. Under exactly-once that plain commit lands outside every transaction and
 * overwrites the offsets the tasks' transactions committed: the next owner of the partition finds
 * "earliest" and processes the partition again from its start, writing every output a second time.
 * Kafka's Java consumer never commits on a reset (it only moves its position), nor does Kafka
 * Streams.
 *
 * This replaces it with a reset of the position alone: the partition's earliest (or latest) offset
 * is looked up and becomes where the next fetch starts, nothing is committed. The task, not the
 * consumer, knows its position: records below it are skipped (record-loop.ts), so a position that
 * went back costs a re-read, never a duplicate; one that moved forward (records deleted below it)
 * is what retention took.
 */
import { replaceMethod } from './kafkajs-prototype.js';

interface OffsetManagerLike {
  cluster: {
    fetchTopicsOffset(
      topics: Array<{ topic: string; partitions: Array<{ partition: number }>; fromBeginning?: boolean }>,
    ): Promise<Array<{ topic: string; partitions: Array<{ partition: number; offset: string }> }>>;
  };
  topicConfigurations: Record<string, { fromBeginning?: boolean } | undefined>;
  committedOffsets(): Record<string, Record<number, string>>;
  clearOffsets(tp: { topic: string; partition: number }): void;
}

/** The position of `partition` reset to the log's start (or end), in memory: nothing committed. */
export async function resetPositionOnly(
  this: OffsetManagerLike,
  { topic, partition }: { topic: string; partition: number },
): Promise<void> {
  const fromBeginning = this.topicConfigurations[topic]?.fromBeginning ?? true;
  const answer = await this.cluster.fetchTopicsOffset([
    { topic, partitions: [{ partition }], fromBeginning },
  ]);
  const offset = answer
    .find((t) => t.topic === topic)
    ?.partitions.find((p) => p.partition === partition)?.offset;
  if (offset === undefined)
    throw new Error(`no ${fromBeginning ? 'earliest' : 'latest'} offset for ${topic}:${partition}`);
  this.clearOffsets({ topic, partition });
  const committed = this.committedOffsets();
  (committed[topic] ??= {})[partition] = offset;
}

/** Whether kafkajs's offset-out-of-range reset commits nothing now. */
export const offsetResetPatched = replaceMethod(
  'kafkajs/src/consumer/offsetManager/index.js',
  'setDefaultOffset',
  resetPositionOnly,
  ['clearOffsets', 'committedOffsets'],
);
