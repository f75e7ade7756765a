import type { KafkaAdmin } from '../kafka/admin.js';
import type { SubTopology } from '../topology/build.js';
import type { MutableRecordContext } from './record-context.js';
import type { TaskProgress } from './task-progress.js';
import { committedFloor, watermarkTopics } from './watermark.js';

/**
 * Where a starting task resumes each input: the group's committed offset of its partition (or
 * the log's start when there is none, explicitly, so that a reset goes back there too), with
 * the event time and watermark the commit's metadata carries; the consumer is sought there.
 */
export async function resumeInputs(
  admin: KafkaAdmin,
  groupId: string,
  task: { sub: SubTopology; partition: number },
  progress: TaskProgress,
  rc: MutableRecordContext,
  seek: (topic: string, offset: string) => void,
): Promise<void> {
  const { sub, partition } = task;
  const committed = await admin.committedOffsets(groupId, sub.sourceTopics);
  const wm = progress.watermark;
  const mine = committed.filter((o) => o.partition === partition);
  wm.reset(watermarkTopics(sub), rc.now(), committedFloor(mine.map((o) => o.metadata)));
  rc.watermark = wm.value;
  for (const topic of sub.sourceTopics) {
    const c = mine.find((o) => o.topic === topic);
    wm.restore(topic, c?.metadata);
    let off = c && BigInt(c.offset) >= 0n ? BigInt(c.offset) : undefined;
    if (off === undefined) {
      const low = (await admin.offsets(topic)).find((p) => p.partition === partition)?.low;
      off = BigInt(low ?? '0');
    }
    progress.next.set(topic, off);
    seek(topic, off.toString());
  }
}
