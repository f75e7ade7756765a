import type { TopicPartitionOffset } from './types.js';

/**
 * At-least-once offset commits of a worker's tasks, merged: one OffsetCommit request at a time,
 * and the commits asked for while it is in flight go together in the next one (Kafka Streams
 * commits every task of a thread in one request too). Each task checkpoints on its own, so
 * without this a worker of 4 tasks sent 4 requests per commit interval, each an append to
 * `__consumer_offsets` on a broker that shares the machine.
 *
 * A partition asked for twice in one request commits the later offset (the order of the calls,
 * as separate requests would). A failed request fails every commit it carried; the tasks'
 * records are then read again, as at-least-once allows.
 */
export class OffsetCommits {
  readonly #commit: (offsets: TopicPartitionOffset[]) => Promise<void>;
  #queue: Array<{ offsets: readonly TopicPartitionOffset[]; done: (e?: unknown) => void }> = [];
  #busy = false;
  /** Requests sent (for tests and the metrics' curious). */
  requests = 0;

  constructor(commit: (offsets: TopicPartitionOffset[]) => Promise<void>) {
    this.#commit = commit;
  }

  commit(offsets: readonly TopicPartitionOffset[]): Promise<void> {
    if (offsets.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ offsets, done: (e) => (e === undefined ? resolve() : reject(e)) });
      if (!this.#busy) void this.#drain();
    });
  }

  async #drain(): Promise<void> {
    this.#busy = true;
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue;
        this.#queue = [];
        const merged = new Map<string, TopicPartitionOffset>();
        for (const c of batch)
          for (const o of c.offsets) {
            const k = `${o.topic}\u0000${o.partition}`;
            merged.delete(k); // the later one, in the order asked
            merged.set(k, { ...o });
          }
        let failure: unknown;
        try {
          this.requests++;
          await this.#commit([...merged.values()]);
        } catch (e) {
          failure = e ?? new Error('offset commit failed');
        }
        for (const c of batch) c.done(failure);
      }
    } finally {
      this.#busy = false;
    }
  }
}
