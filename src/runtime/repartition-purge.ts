import type { KafkaAdmin } from '../kafka/admin.js';
import type { Logger } from '../ops/logger.js';

export interface RepartitionPurgeDeps {
  groupId: string;
  intervalMs: number;
  admin: () => Promise<KafkaAdmin>;
  /** The app's repartition topics (none: nothing to do). */
  topics: { has(topic: string): boolean; readonly size: number };
  /** The worker's tasks now: their repartition inputs are purged. */
  tasks: () => Iterable<{ sub: { sourceTopics: readonly string[] }; partition: number }>;
  logger: Logger;
  /** A round's request failed (counted: `sluice_errors_total{kind="repartition_purge"}`). */
  failed: () => void;
}

/**
 * Deletes the records of the worker's repartition partitions before the app's committed offsets
 * (DeleteRecords), every `processing.repartitionPurgeIntervalMs`, as Kafka Streams purges its
 * repartition topics. Those topics are created without time retention (`retention.ms` -1): their
 * records carry event time, and a broker's time retention deleted a backfill's records (older
 * than the retention) at its next check, before the reading sub-topology got to them. So this
 * purge is what bounds them. Only committed offsets are used (under exactly-once, those of
 * committed transactions), so nothing a task may still read again goes.
 */
export class RepartitionPurge {
  readonly #d: RepartitionPurgeDeps;
  /** What was purged last, by `topic:partition`: unchanged offsets are not sent again. */
  readonly #purged = new Map<string, string>();
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = false;

  constructor(d: RepartitionPurgeDeps) {
    this.#d = d;
  }

  start(): void {
    if (this.#d.intervalMs <= 0 || this.#d.topics.size === 0 || this.#timer) return;
    this.#timer = setInterval(() => {
      this.#running ??= this.purge().finally(() => {
        this.#running = undefined;
      });
    }, this.#d.intervalMs);
    this.#timer.unref();
  }

  /**
   * No more rounds. One in flight is not waited for: a DeleteRecords can take minutes of retries
   * (a replica catching up), and a stopping worker's final checkpoints must not wait for it; it
   * ends when the worker closes its client, and its error is caught.
   */
  stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One round: the owned partitions' committed offsets, then a DeleteRecords per topic that moved. */
  async purge(): Promise<void> {
    const byTopic = new Map<string, Set<number>>();
    for (const t of this.#d.tasks())
      for (const topic of t.sub.sourceTopics) {
        if (!this.#d.topics.has(topic)) continue;
        const s = byTopic.get(topic) ?? new Set<number>();
        s.add(t.partition);
        byTopic.set(topic, s);
      }
    if (byTopic.size === 0) return;
    // Only disk is at stake on a failure: the next round tries again. Counted, because these
    // topics have no time retention: a purge that always fails (no Delete permission on the
    // topics) lets them grow.
    const failed = (e: unknown, topic?: string) => {
      if (this.#stopped) return; // the round was cut off by the worker's stop, not a failure
      this.#d.failed();
      this.#d.logger.warn({ err: e, topic }, 'purging repartition records failed; will retry');
    };
    let admin: KafkaAdmin;
    let committed: Awaited<ReturnType<KafkaAdmin['committedOffsets']>>;
    try {
      admin = await this.#d.admin();
      committed = await admin.committedOffsets(this.#d.groupId, [...byTopic.keys()]);
    } catch (e) {
      return failed(e);
    }
    const due = new Map<string, Array<{ partition: number; offset: string }>>();
    for (const c of committed) {
      // -1 (nothing committed) must never go: DeleteRecords takes it as "up to the end".
      if (!byTopic.get(c.topic)?.has(c.partition) || !/^\d+$/.test(c.offset) || c.offset === '0') continue;
      if (this.#purged.get(`${c.topic}:${c.partition}`) === c.offset) continue;
      const l = due.get(c.topic) ?? [];
      l.push({ partition: c.partition, offset: c.offset });
      due.set(c.topic, l);
    }
    for (const [topic, partitions] of due) {
      try {
        await admin.deleteRecordsBefore(topic, partitions);
      } catch (e) {
        failed(e, topic);
        continue;
      }
      for (const p of partitions) this.#purged.set(`${topic}:${p.partition}`, p.offset);
      this.#d.logger.debug({ topic, partitions }, 'repartition records purged');
    }
  }
}
