import type { KafkaAdmin } from '../kafka/admin.js';
import type { KafkaClient } from '../kafka/client.js';
import type { SubTopology } from '../topology/build.js';
import type { MutableRecordContext } from './record-context.js';
import { StartStepTimeoutError, within } from './start-watch.js';
import type { TaskProgress } from './task-progress.js';
import { committedFloor, watermarkTopics } from './watermark.js';

/**
 * Where a starting task resumes each input: the group's committed offset of its partition (or
 * the log's start when there is none, explicitly, so that a reset goes back there too), with
 * the event time and watermark the commit's metadata carries; the consumer is sought there.
 * Everything is read from the brokers first and applied at once, and only while `current()`
 * holds: a start that timed out (and was retried) must not seek the consumer later on.
 */
export async function resumeInputs(
  admin: KafkaAdmin,
  groupId: string,
  task: { sub: SubTopology; partition: number },
  progress: TaskProgress,
  rc: MutableRecordContext,
  seek: (topic: string, offset: string) => void,
  current: () => boolean,
  timeoutMs: number,
): Promise<boolean> {
  const { sub, partition } = task;
  // Stable offsets (require_stable), as Kafka Streams' read_committed consumer reads them: a
  // transaction's offsets still pending at the group's coordinator (its marker there not yet
  // applied, while the changelog's may be, and the restore has replayed it) wait, instead of
  // answering the offset before them.
  const tps = sub.sourceTopics.map((topic) => ({ topic, partitions: [partition] }));
  const committed = await admin.committedOffsetsStable(groupId, tps, { timeoutMs });
  const mine = committed.filter((o) => o.partition === partition);
  const resume = new Map<string, bigint>();
  for (const topic of sub.sourceTopics) {
    const c = mine.find((o) => o.topic === topic);
    let off = c && BigInt(c.offset) >= 0n ? BigInt(c.offset) : undefined;
    if (off === undefined) {
      const low = (await admin.offsets(topic)).find((p) => p.partition === partition)?.low;
      off = BigInt(low ?? '0');
    }
    resume.set(topic, off);
  }
  if (!current()) return false;
  const wm = progress.watermark;
  wm.reset(watermarkTopics(sub), rc.now(), committedFloor(mine.map((o) => o.metadata)));
  rc.watermark = wm.value;
  for (const [topic, off] of resume) {
    wm.restore(topic, mine.find((o) => o.topic === topic)?.metadata);
    progress.next.set(topic, off);
    seek(topic, off.toString());
  }
  return true;
}

/**
 * The broker half of a start after the restore: the repartition topics' writers (announced
 * first: resumeInputs applies what it read at once), then the input offsets. Bounded by
 * `boundMs`: a call that never answers fails the start (retried, with a new admin client when it
 * timed out) instead of holding the task's partitions; a late answer then changes nothing, and
 * neither does one for a task closed meanwhile (revoked during its start: the seek would be the
 * consumer's next position for a partition that is now another task's).
 */
export async function startInputs(
  client: KafkaClient,
  groupId: string,
  task: { sub: SubTopology; partition: number; readonly isClosed?: boolean },
  progress: TaskProgress,
  rc: MutableRecordContext,
  seek: (topic: string, offset: string) => void,
  boundMs: number,
): Promise<void> {
  let abandoned = false;
  const inputs = async () => {
    const admin = await client.admin();
    const writers = await progress.announceWriters(admin);
    if (
      !(await resumeInputs(
        admin,
        groupId,
        task,
        progress,
        rc,
        seek,
        () => !abandoned && task.isClosed !== true,
        boundMs,
      ))
    )
      return;
    progress.clear();
    progress.openAnnounce(task.partition, writers);
  };
  await within(inputs(), boundMs, 'input offsets').catch((e: unknown) => {
    abandoned = true;
    if (e instanceof StartStepTimeoutError) void client.renewAdmin?.().catch(() => undefined);
    throw e;
  });
}
