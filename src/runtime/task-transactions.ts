import type { TopicRecords, WrittenOffsets } from '../kafka/producer.js';
import type { TopicPartitionOffset } from '../kafka/types.js';

/** What a task commits its checkpoints through under exactly-once (TransactionalProducer's shape). */
export interface TaskTransactions {
  /** Begins the next transaction ahead of the checkpoint, where it can (TransactionalProducer.begin). */
  begin(commitIntervalMs: number): void;
  /**
   * Exactly-once v2: sends the records `take()` gives into the transaction begun ahead, before
   * the checkpoint that commits them, if one is open and may take them now (else `take` is not
   * called and false is returned). They commit with the task's next checkpoint: in that
   * transaction, or sent again in a later one if it was given up (`Member.lost`).
   */
  sendAhead?(take: () => TopicRecords): boolean;
  /**
   * Commits the checkpoint's records and offsets; rejects if they did not commit. `ahead`: what
   * the task sent ahead since its last checkpoint (v2), sent again if that transaction was lost.
   */
  commitTransaction(
    records: TopicRecords,
    offsets: { groupId: string; offsets: readonly TopicPartitionOffset[] },
    ahead?: readonly TopicRecords[],
  ): Promise<WrittenOffsets>;
  /** The task lets go: what it has queued fails, and a transaction holding its records is given up. */
  close(): Promise<void>;
}

/** What a {@link Member} asks of its worker's transactions (WorkerTransactions). */
export interface MemberHost {
  beginAhead(commitIntervalMs: number): void;
  sendAhead(member: Member, take: () => TopicRecords): boolean;
  enqueue(
    member: Member,
    records: TopicRecords,
    offsets: readonly TopicPartitionOffset[],
    ahead: readonly TopicRecords[],
  ): Promise<WrittenOffsets>;
  release(member: Member): Promise<void>;
}

/**
 * A task's checkpoint failed with its worker's transaction: one error per task, its cause the
 * transaction's. The task manager handles each checkpoint failure once, by its error object; one
 * object shared by every task of the transaction reset only the first, and the others went on
 * from state whose outputs had not committed (found by the broker-outage test).
 */
export class WorkerTransactionError extends Error {
  constructor(taskId: string, cause: unknown) {
    super(`task ${taskId}: its worker's transaction failed: ${(cause as Error)?.message ?? String(cause)}`, {
      cause,
    });
    this.name = (cause as Error)?.name ?? 'WorkerTransactionError';
  }
}

/** One task's handle on its worker's transactions. */
export class Member implements TaskTransactions {
  readonly taskId: string;
  readonly #w: MemberHost;
  #closed = false;
  constructor(w: MemberHost, taskId: string) {
    this.#w = w;
    this.taskId = taskId;
  }
  /**
   * @internal The transaction this task sent records ahead into was given up (never to commit):
   * its next checkpoint sends them again, and it sends nothing more ahead until then.
   */
  lost = false;
  begin(commitIntervalMs: number): void {
    if (!this.#closed) this.#w.beginAhead(commitIntervalMs);
  }
  sendAhead(take: () => TopicRecords): boolean {
    return !this.#closed && !this.lost && this.#w.sendAhead(this, take);
  }
  commitTransaction(
    records: TopicRecords,
    offsets: { groupId: string; offsets: readonly TopicPartitionOffset[] },
    ahead: readonly TopicRecords[] = [],
  ): Promise<WrittenOffsets> {
    if (this.#closed) return Promise.reject(new Error(`task ${this.taskId} closed`));
    return this.#w.enqueue(this, records, offsets.offsets, ahead);
  }
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#w.release(this);
  }
}
