/**
 * Where the consumer's next fetch of each partition starts, as Sluice moved it: a seek (a task
 * starting or reset goes back to its committed offsets), an offset a batch handler resolved (the
 * last record it took), a batch kafkajs resolved by itself (transaction markers or aborted records
 * only), an out-of-range position kafkajs moved to the log's start (kafkajs-fetch-guard.ts tells
 * the last two). A batch fetched from beyond that position is an answer to a fetch made before a
 * seek:
 *
 * kafkajs drops a batch as stale only while a seek is still pending for its partition. With several
 * brokers, a fetch to a partition's old leader can be answered (or wait in the runner's queue, or
 * wait for a restoring task) while the new leader's fetcher takes the seek. That batch then passes
 * as current, though it starts where the task stood before it was reset, past the records the
 * reset went back for: processed (or, holding only markers, resolved by kafkajs), it would move the
 * task over them, and they would never produce their outputs. So such a batch is dropped
 * unresolved and the partition sought back to the position (Kafka's Java consumer discards a
 * fetch whose offset does not match the position the same way).
 *
 * A safety valve: should kafkajs move a position some way not tracked here, seeking back would
 * repeat for ever. After {@link MAX_DROPS} batches in a row dropped at the same position, the next
 * one beyond it is taken, and the gap logged.
 */
export type FetchVerdict =
  /** Contiguous with the position (or the position is unknown): process it. */
  | { kind: 'take' }
  /** Fetched from beyond the position: drop it, seek back to `to`. */
  | { kind: 'seek'; to: string }
  /** Beyond the position again after {@link MAX_DROPS} seeks back to it: taken, the gap logged. */
  | { kind: 'gap'; from: string; to: string };

/** Batches dropped in a row at one position before the next one beyond it is taken. */
export const MAX_DROPS = 3;

const keyOf = (topic: string, partition: number) => `${topic}\u0000${partition}`;

export class FetchPositions {
  readonly #at = new Map<string, bigint>();
  /** Batches dropped in a row per partition, at which position. */
  readonly #drops = new Map<string, { at: bigint; n: number }>();

  /**
   * @param seekPending whether a seek of the partition waits for its next fetch (kafkajs's own
   *   stale check): while one does, the next fetch starts where the seek says, so nothing else
   *   moves the position.
   */
  constructor(readonly seekPending: (topic: string, partition: number) => boolean = () => false) {}

  /** A seek: the next fetch starts at `offset`. */
  sought(topic: string, partition: number, offset: string): void {
    const k = keyOf(topic, partition);
    this.#at.set(k, BigInt(offset));
    this.#drops.delete(k);
  }

  /** kafkajs moved an out-of-range position to `offset` (the log's start): unless a seek overrides it. */
  reset(topic: string, partition: number, offset: string): void {
    if (!this.seekPending(topic, partition)) this.sought(topic, partition, offset);
  }

  /**
   * `offset` was resolved: by a batch handler (the last record it took, or the fetch's last offset
   * for a batch's last record, since kafkajs resolves trailing markers with it), or by kafkajs
   * itself for a batch with no record to hand over (markers, aborted records). The next fetch
   * starts after it, unless a seek overrides it.
   */
  resolved(topic: string, partition: number, offset: string): void {
    if (!this.seekPending(topic, partition)) this.sought(topic, partition, (BigInt(offset) + 1n).toString());
  }

  /** What to do with a batch fetched from `fetchedOffset`. */
  check(topic: string, partition: number, fetchedOffset: string): FetchVerdict {
    const k = keyOf(topic, partition);
    const at = this.#at.get(k);
    if (at === undefined || BigInt(fetchedOffset) <= at) {
      this.#drops.delete(k);
      return { kind: 'take' };
    }
    const d = this.#drops.get(k);
    const n = d?.at === at ? d.n + 1 : 1;
    if (n > MAX_DROPS) {
      this.#drops.delete(k);
      return { kind: 'gap', from: at.toString(), to: fetchedOffset };
    }
    this.#drops.set(k, { at, n });
    return { kind: 'seek', to: at.toString() };
  }

  /** A new generation or a restarted consumer: positions are known again from the next seek or resolve. */
  clear(): void {
    this.#at.clear();
    this.#drops.clear();
  }
}
