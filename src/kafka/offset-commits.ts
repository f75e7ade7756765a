import type { TopicPartitionOffset } from './types.js';

/** A request that takes longer fails its commits (they are only logged) and the queue goes on. */
export const OFFSET_COMMIT_TIMEOUT_MS = 15_000;

export interface OffsetCommitsOptions {
  /** One OffsetCommit request (kafkajs's `consumer.commitOffsets`). */
  commit: (offsets: TopicPartitionOffset[]) => Promise<void>;
  /** The member's generation now: a commit asked for under an older one is not sent. */
  generation?: () => number | undefined;
  timeoutMs?: number;
}

interface Queued {
  offsets: readonly TopicPartitionOffset[];
  generation: number | undefined;
  done: (e?: unknown) => void;
}

/**
 * At-least-once offset commits of a worker's tasks, merged: one OffsetCommit request at a time,
 * and the commits asked for while it is in flight (or in the same turn of the event loop) go
 * together in the next one (Kafka Streams commits every task of a thread in one request too).
 * Each task checkpoints on its own, so without this a worker of 4 tasks sent 4 requests per
 * commit interval, each an append to `__consumer_offsets` on a broker that shares the machine.
 *
 * - A partition asked for twice in one request commits the later offset (the order of the calls,
 *   as separate requests would).
 * - kafkajs fails a whole request for one partition's error, so a merged request that fails is
 *   sent again per commit, each settled by its own answer: one task's bad partition (a deleted
 *   topic, a denied one) fails only its own commit, as before the merge.
 * - A request unanswered after {@link OFFSET_COMMIT_TIMEOUT_MS} (kafkajs retries a retriable
 *   error for long) fails its commits, and the queue goes on.
 * - A commit asked for under an older generation than the member's now (queued across a
 *   rebalance) is failed, not sent: kafkajs would send it with the new generation, for
 *   partitions that may be another member's now.
 *
 * A failed commit is only logged by the checkpoint: its records are read again, as
 * at-least-once allows.
 */
export class OffsetCommits {
  readonly #o: Required<Omit<OffsetCommitsOptions, 'generation'>> & Pick<OffsetCommitsOptions, 'generation'>;
  #queue: Queued[] = [];
  #busy = false;
  /** Requests sent (for tests). */
  requests = 0;

  constructor(o: OffsetCommitsOptions) {
    this.#o = { timeoutMs: OFFSET_COMMIT_TIMEOUT_MS, ...o };
  }

  commit(offsets: readonly TopicPartitionOffset[]): Promise<void> {
    if (offsets.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({
        offsets,
        generation: this.#o.generation?.(),
        done: (e) => (e === undefined ? resolve() : reject(e)),
      });
      if (!this.#busy) {
        this.#busy = true;
        // The commits of the tasks that checkpointed in this turn go in the first request too.
        setImmediate(() => void this.#drain());
      }
    });
  }

  async #drain(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue;
        this.#queue = [];
        const now = this.#o.generation?.();
        const live: Queued[] = [];
        for (const c of batch) {
          if (c.generation !== undefined && now !== undefined && c.generation !== now)
            c.done(new Error(`offset commit asked for in generation ${c.generation}, now ${now}: not sent`));
          else live.push(c);
        }
        if (live.length === 0) continue;
        const failure = await this.#attempt(live);
        if (failure === undefined || live.length === 1) {
          for (const c of live) c.done(failure);
          continue;
        }
        // One request per commit, each settled on its own (one partition's error failed them all).
        for (const c of live) c.done(await this.#attempt([c]));
      }
    } finally {
      this.#busy = false;
    }
  }

  /** Sends the commits in one request; resolves to its error (undefined when it committed). */
  async #attempt(commits: readonly Queued[]): Promise<unknown> {
    try {
      return await this.#send(merge(commits));
    } catch (e) {
      return e ?? new Error('offset commit failed');
    }
  }

  async #send(offsets: TopicPartitionOffset[]): Promise<unknown> {
    this.requests++;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<unknown>((resolve) => {
      timer = setTimeout(
        () => resolve(new Error(`offset commit unanswered after ${this.#o.timeoutMs} ms`)),
        this.#o.timeoutMs,
      );
      timer.unref?.();
    });
    try {
      return await Promise.race([
        this.#o.commit(offsets).then(
          () => undefined,
          (e: unknown) => e ?? new Error('offset commit failed'),
        ),
        timeout,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** The commits' offsets in one list, a partition asked for twice at its later offset. */
function merge(commits: readonly Queued[]): TopicPartitionOffset[] {
  const merged = new Map<string, TopicPartitionOffset>();
  for (const c of commits)
    for (const o of c.offsets) {
      const k = `${o.topic}\u0000${o.partition}`;
      merged.delete(k); // placed where it was asked for last
      merged.set(k, { ...o });
    }
  return [...merged.values()];
}
