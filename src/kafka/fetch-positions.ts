/**
 * Where the consumer's next fetch of each partition starts, as Sluice moved it: a seek (a task
 * starting or reset goes back to its committed offsets), an offset a batch handler resolved (the
 * last record it took), a batch kafkajs resolved by itself (transaction markers or aborted records
 * only). A batch fetched from beyond that position is an answer to a fetch made before a seek:
 *
 * kafkajs drops a batch as stale only while a seek is still pending for its partition. With several
 * brokers, a fetch to a partition's old leader can be answered (or wait in the runner's queue, or
 * wait for a restoring task) while the new leader's fetcher takes the seek. That batch then passes
 * as current, though it starts where the task stood before it was reset, past the records the
 * reset went back for: processed, it would move the task over them, and they would never produce
 * their outputs. So such a batch is dropped unresolved and the partition sought back to the
 * position (Kafka's Java consumer drops a fetch whose position no longer matches the same way).
 *
 * One case has a batch beyond the position without a seek behind it: the position is no longer in
 * the log (retention deleted it, and kafkajs went on from the log's start). Sought back once,
 * kafkajs answers from beyond it again; that second batch is taken, and the gap logged.
 */
export type FetchVerdict =
  /** Contiguous with the position (or the position is unknown): process it. */
  | { kind: 'take' }
  /** Fetched from beyond the position: drop it, seek back to `to`. */
  | { kind: 'seek'; to: string }
  /** Beyond the position again right after a seek back to it: the records between are gone. */
  | { kind: 'gap'; from: string; to: string };

const keyOf = (topic: string, partition: number) => `${topic}\u0000${partition}`;

export class FetchPositions {
  readonly #at = new Map<string, bigint>();
  /** Partitions sought back to their position once, at that position. */
  readonly #soughtBack = new Map<string, bigint>();

  /** A seek: the next fetch starts at `offset`. */
  sought(topic: string, partition: number, offset: string): void {
    const k = keyOf(topic, partition);
    this.#at.set(k, BigInt(offset));
    this.#soughtBack.delete(k);
  }

  /** A batch handler resolved `offset`: the next fetch starts after it. */
  resolved(topic: string, partition: number, offset: string): void {
    const k = keyOf(topic, partition);
    this.#at.set(k, BigInt(offset) + 1n);
    this.#soughtBack.delete(k);
  }

  /** kafkajs resolved a batch with no record to hand over (markers, aborted records) at `lastOffset`. */
  skipped(topic: string, partition: number, lastOffset: string): void {
    this.resolved(topic, partition, lastOffset);
  }

  /** What to do with a batch of records fetched from `fetchedOffset`. */
  check(topic: string, partition: number, fetchedOffset: string): FetchVerdict {
    const k = keyOf(topic, partition);
    const at = this.#at.get(k);
    if (at === undefined) return { kind: 'take' };
    const from = BigInt(fetchedOffset);
    if (from <= at) return { kind: 'take' };
    if (this.#soughtBack.get(k) === at) {
      this.#soughtBack.delete(k);
      return { kind: 'gap', from: at.toString(), to: fetchedOffset };
    }
    this.#soughtBack.set(k, at);
    return { kind: 'seek', to: at.toString() };
  }

  /** A new assignment: the positions of partitions no longer assigned are forgotten. */
  retain(assigned: ReadonlyArray<{ topic: string; partition: number }>): void {
    const keep = new Set(assigned.map((a) => keyOf(a.topic, a.partition)));
    for (const k of [...this.#at.keys()]) if (!keep.has(k)) this.#at.delete(k);
    for (const k of [...this.#soughtBack.keys()]) if (!keep.has(k)) this.#soughtBack.delete(k);
  }
}
