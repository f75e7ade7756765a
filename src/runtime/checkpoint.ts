import { TaskMigratedError } from '../errors.js';
import {
  isFencedError,
  isGenerationFenced,
  type PlainProducer,
  type TopicRecords,
  type WrittenOffsets,
} from '../kafka/producer.js';
import { recordCount } from '../kafka/record-batch.js';
import type { OutRecord, TopicPartitionOffset } from '../kafka/types.js';
import { HistogramTally } from '../ops/histogram-tally.js';
import type { Logger } from '../ops/logger.js';
import type { WorkerMetrics } from '../ops/metrics.js';
import { checkpointSize } from './checkpoint-size.js';
import type { OutputStream } from './output-stream.js';
import type { TaskProgress } from './task-progress.js';
import type { TaskState } from './task-state.js';
import type { TaskTransactions } from './worker-transactions.js';

export interface CheckpointDeps {
  appId: string;
  taskId: string;
  groupId: string;
  partition: number;
  /** Exactly-once: one transaction; else at-least-once through the shared producer. */
  eos: boolean;
  logger: Logger;
  metrics: WorkerMetrics;
  deadLetterTopic: string;
  overflowTopic: string;
  /** The worker's shared producer (at-least-once only). */
  plainProducer: () => Promise<PlainProducer>;
  /** Commits offsets through the group (at-least-once only). */
  commitOffsets: (offsets: TopicPartitionOffset[]) => Promise<void>;
  /**
   * Exactly-once v2: the checkpoint goes in its worker's transaction (counted there), and always
   * commits the task's offsets (unchanged ones again).
   */
  sharedTransaction?: boolean;
  /** The task's queue of sends (at-least-once only): early outputs, then the checkpoint's. */
  outputs?: OutputStream;
}

/**
 * The commit protocol of one task: what the task did since the last checkpoint (outputs,
 * changelog records and input offsets) goes to Kafka in one transaction (exactly-once) or in
 * that order (at-least-once); then, and only then, the local RocksDB batch.
 */
export async function writeCheckpoint(
  d: CheckpointDeps,
  progress: TaskProgress,
  /** Read where it is used: a reset may take the state away while the commit is in flight. */
  store: () => TaskState | undefined,
  producer: TaskTransactions | undefined,
): Promise<void> {
  const started = performance.now();
  // The interval runs from a checkpoint's start: records processed while it is in flight are
  // due at the next one, one interval later, however long this commit takes.
  progress.lastCheckpoint = Date.now();
  // A failed checkpoint took outputs with it (its snapshot drained the collector): none after it
  // may commit offsets past them. The task resets first (the task manager does; a stopping
  // worker's, or a revoked task under v1, closed with one more checkpoint instead).
  if (progress.failed === progress.cleared)
    throw new Error(`task ${d.taskId}: a checkpoint failed since its last reset; none commits before it`);
  const app = d.appId;
  const committedNext = new Map(progress.toCommit);
  const dirtyRecords = progress.dirtyRecords;
  // A reset clears the progress while this commit may still be in flight: then what this one
  // took is no longer in it to forget (dirtyRecords would go below zero).
  const cleared = progress.cleared;
  const records = progress.collector.drain();
  const outputCount = [...records.values()].reduce((a, l) => a + recordCount(l), 0);
  const changelog = new Map<string, OutRecord[]>();
  try {
    // Into record batches when the outputs go into them: a producer that sends batches.
    store()?.writeChangelog(changelog, d.partition, progress.collector.partitionsOf !== undefined);
  } catch (e) {
    progress.failed = cleared; // the outputs drained above go with it (a value that cannot be written)
    throw e;
  }
  const all = new Map(records);
  for (const [t, l] of changelog) all.set(t, l);
  // The partition's event time goes with its offset (as Kafka Streams does), so that a task
  // restarted anywhere resumes with the watermark it had: late is late, before and after a crash.
  const offsets: TopicPartitionOffset[] = [...progress.toCommit].map(([topic, o]) => ({
    topic,
    partition: d.partition,
    offset: o.toString(),
    metadata: progress.watermark.metadataOf(topic),
  }));
  // Exactly-once v2: every task in a transaction commits offsets, so that the group's coordinator
  // checks the worker's generation on everything the transaction holds (a zombie's transaction
  // with only this task's timer outputs would otherwise commit). Unchanged offsets go again.
  if (d.eos && d.sharedTransaction === true && offsets.length === 0)
    offsets.push(...unchangedOffsets(d, progress));
  try {
    // Two statements: with no store, `store()?.commitLocal(...)` would skip its argument.
    const written = await commitToKafka(d, producer, all, records, offsets);
    await store()?.commitLocal(written);
  } catch (e) {
    if (progress.cleared === cleared) progress.failed = cleared;
    throw e;
  }
  // Another input's batch may have been processed while this commit was in flight (kafkajs
  // runs partitions concurrently, and a task reads one partition of each of its topics): its
  // offsets and records belong to the next checkpoint, so forget only what this one committed.
  if (progress.cleared === cleared) {
    for (const [topic, o] of committedNext)
      if (progress.toCommit.get(topic) === o) progress.toCommit.delete(topic);
    progress.dirtyRecords -= dirtyRecords;
  }
  if (d.eos) countOutputs(d, records);
  for (const [topic, l] of changelog) d.metrics.changelogRecords.inc({ app, store: topic }, recordCount(l));
  d.metrics.checkpoints.inc({ app });
  const size = checkpointSize(all.values());
  d.metrics.checkpointRecords.observe({ app }, size.records);
  d.metrics.checkpointBytes.observe({ app }, size.bytes);
  store()?.flushCacheMetrics();
  d.metrics.checkpointDuration.observe({ app }, (performance.now() - started) / 1000);
  d.logger.trace({ outputs: outputCount, offsets }, 'checkpoint');
  d.outputs?.flush(); // what collected while this one's send was on its way
}

/** The task's current input positions, as offsets to commit again (carrying their event times). */
function unchangedOffsets(d: CheckpointDeps, progress: TaskProgress): TopicPartitionOffset[] {
  const out: TopicPartitionOffset[] = [];
  for (const [topic, o] of progress.next)
    if (o !== undefined)
      out.push({
        topic,
        partition: d.partition,
        offset: o.toString(),
        metadata: progress.watermark.metadataOf(topic),
      });
  return out;
}

/** Outputs written (visible: committed, or sent under at-least-once): counted, their latency observed. */
export function countOutputs(
  d: Pick<CheckpointDeps, 'appId' | 'metrics' | 'deadLetterTopic' | 'overflowTopic'>,
  records: TopicRecords,
): void {
  const app = d.appId;
  const now = Date.now();
  // Counted here, added to the histogram once per topic (prom-client's observe per record was hot).
  const latency = new HistogramTally(d.metrics.latency);
  for (const [topic, l] of records) {
    if (topic === d.deadLetterTopic) continue;
    if (topic === d.overflowTopic) {
      d.metrics.recordsOut.inc({ app, topic }, recordCount(l));
      continue;
    }
    d.metrics.recordsOut.inc({ app, topic }, recordCount(l));
    for (let i = 0; i < l.length; i++) {
      const b = l[i]!.batch;
      if (b === undefined) latency.add(Math.max(0, now - Number(l[i]!.timestamp)) / 1000);
      else for (let j = 0; j < b.count; j++) latency.add(Math.max(0, now - b.stamps[j]!) / 1000);
    }
    latency.foldInto({ app, topic });
  }
}

async function commitOffsetsAtLeastOnce(d: CheckpointDeps, offsets: TopicPartitionOffset[]): Promise<void> {
  try {
    await d.commitOffsets(offsets);
  } catch (e) {
    // The outputs are written; a lost offset commit only means the records are read again.
    d.logger.warn({ err: e }, 'offset commit failed (at-least-once: records will be re-read)');
  }
}

/** The checkpoint's records and offsets to Kafka: one transaction, or (at-least-once) in order. */
async function commitToKafka(
  d: CheckpointDeps,
  producer: TaskTransactions | undefined,
  all: TopicRecords,
  records: TopicRecords,
  offsets: TopicPartitionOffset[],
): Promise<WrittenOffsets> {
  if (d.eos) {
    let written: WrittenOffsets;
    try {
      written = await producer!.commitTransaction(all, { groupId: d.groupId, offsets });
    } catch (e) {
      // Fenced: another worker's producer of this task has the newer epoch, so it owns the task
      // now (or is fencing to take it). Nothing of this checkpoint committed; the caller closes
      // the task without committing and rejoins, and must not re-init it on its own.
      // Exactly-once v2: the group's coordinator refused the offsets of a member no longer in its
      // generation (KIP-447), the same situation met from the group's side. There a fenced
      // producer says nothing about the tasks: its transactional id is the worker's, bumped by a
      // transaction that timed out or by another process with this worker's instance id (which the
      // group fences in turn). The tasks reset; were they another's now, the generation tells.
      if (isGenerationFenced(e) || (d.sharedTransaction !== true && isFencedError(e)))
        throw new TaskMigratedError(d.taskId, e);
      throw e;
    }
    if (d.sharedTransaction !== true) d.metrics.txCommits.inc({ app: d.appId });
    return written;
  }
  // After every output sent early (output-stream.ts): the offsets cover their records too.
  const written = d.outputs
    ? await d.outputs.push(all, records)
    : await (await d.plainProducer()).send(all).then((w) => {
        countOutputs(d, records);
        return w;
      });
  await commitOffsetsAtLeastOnce(d, offsets);
  return written;
}
