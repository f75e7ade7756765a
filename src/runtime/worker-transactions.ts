import { TaskMigratedError } from '../errors.js';
import type { KafkaAdmin } from '../kafka/admin.js';
import type { TopicRecords, TransactionalProducer, WrittenOffsets } from '../kafka/producer.js';
import { pinTxnGroupMetadata, retireTxnGroupMetadata } from '../kafka/txn-group-metadata.js';
import type { GroupMetadata, OutRecord, TopicPartitionOffset } from '../kafka/types.js';
import type { Logger } from '../ops/logger.js';
import { WorkerTransactionError } from './worker-transaction-error.js';

/** What a task commits its checkpoints through under exactly-once (TransactionalProducer's shape). */
export interface TaskTransactions {
  /** Begins the next transaction ahead of the checkpoint, where it can (TransactionalProducer.begin). */
  begin(commitIntervalMs: number): void;
  /** Commits the checkpoint's records and offsets; rejects if they did not commit. */
  commitTransaction(
    records: TopicRecords,
    offsets: { groupId: string; offsets: readonly TopicPartitionOffset[] },
  ): Promise<WrittenOffsets>;
  /** The task lets go: what it has queued fails, and a transaction holding its records is given up. */
  close(): Promise<void>;
  /**
   * A topic's partition count as the producer's metadata knows it, or undefined: given, the task's
   * collector writes its outputs into record batches as they come (collector.ts).
   */
  partitionsOf?(topic: string): number | undefined;
}

export interface WorkerTransactionsDeps {
  /** The worker's transactional id: `<appId>-<group.instance.id>` (a restart fences its previous run). */
  transactionalId: string;
  groupId: string;
  /** A producer with this id, fenced (its InitProducerId aborted any open transaction of the id). */
  make: (transactionalId: string) => Promise<TransactionalProducer>;
  /** The worker's place in its group now (undefined before it joined). */
  groupMetadata: () => GroupMetadata | undefined;
  admin: () => Promise<KafkaAdmin>;
  logger: Logger;
  /** Counts each transaction's outcome (`sluice_transaction_commits_total`, `..._aborts_total`)
   *  and, of a committed one, how long its first checkpoint waited for it to begin (seconds). */
  counted?: (committed: boolean, queued?: number) => void;
}

interface Contribution {
  member: Member;
  records: TopicRecords;
  offsets: readonly TopicPartitionOffset[];
  resolve: (w: WrittenOffsets) => void;
  reject: (e: unknown) => void;
  /** When it was queued (performance.now()). */
  at: number;
}

/**
 * Exactly-once v2 (KIP-447, Kafka Streams' exactly_once_v2): one transactional producer per
 * worker, and one transaction at a time holding the checkpoints of every task that asked for one
 * since the last began (the task manager asks for all of them together, once an interval). Its
 * offsets go with the group's generation and member id (TxnOffsetCommit v3), so the group's
 * coordinator refuses the transaction of a worker that lost its tasks; a new owner reads only
 * stable offsets (OffsetFetch v7, require_stable), which waits out a commit of the previous owner
 * still in flight (EOS v1's per-task producers cost a transaction per task and interval).
 *
 * A failed transaction fails every task in it (each resets from its last checkpoint, or closes as
 * migrated when the group fenced it), and the producer is made anew: its InitProducerId aborts
 * what the failed one left open before any task starts again. Transactions begin only while the
 * gate is open: the task manager shuts it before the member rejoins and opens it once the new
 * assignment's revoked tasks are gone, so a transaction never carries a revoked task's records
 * under the generation that revoked it.
 */
export class WorkerTransactions {
  readonly #d: WorkerTransactionsDeps;
  #producer: Promise<TransactionalProducer> | undefined;
  /** The producer last made (a failed one is closed: `partitionsOf` answers undefined until the
   *  next is made, and outputs go as plain records). */
  #made: TransactionalProducer | undefined;
  #queue: Contribution[] = [];
  /** The members in the transaction in flight, and its producer. */
  #flight: { members: Set<Member>; producer: TransactionalProducer } | undefined;
  #open = false;
  #scheduled = false;
  #closed = false;
  /** The members joined and not yet released or revoked. */
  readonly #members = new Set<Member>();

  constructor(deps: WorkerTransactionsDeps) {
    this.#d = deps;
  }

  get transactionalId(): string {
    return this.#d.transactionalId;
  }

  /** A topic's partition count as the producer's metadata knows it (undefined before it is made). */
  partitionsOf(topic: string): number | undefined {
    return this.#made?.partitionsOf(topic);
  }

  /** The producer, made (and the previous one's open transaction aborted) once this resolves. */
  ready(): Promise<TransactionalProducer> {
    if (this.#closed) return Promise.reject(new Error(`worker transactions ${this.transactionalId} closed`));
    if (this.#producer === undefined) {
      const p = this.#d.make(this.#d.transactionalId);
      this.#producer = p;
      p.then(
        (made) => void (this.#made = made),
        () => undefined,
      );
      // A producer that could not be made is made again by the next caller.
      p.catch(() => {
        if (this.#producer === p) this.#producer = undefined;
      });
    }
    return this.#producer;
  }

  /**
   * A starting task's handle, once the producer is ready and the task's input offsets are stable:
   * no transaction of a previous owner with offsets for them is still open (it committed or
   * aborted), so the changelog and the offsets the task reads next are final.
   */
  async join(
    taskId: string,
    inputs: ReadonlyArray<{ topic: string; partitions: number[] }>,
    timeoutMs: number,
  ): Promise<TaskTransactions> {
    await this.ready();
    const admin = await this.#d.admin();
    await admin.committedOffsetsStable(this.#d.groupId, inputs, { timeoutMs });
    const m = new Member(this, taskId);
    this.#members.add(m);
    return m;
  }

  /**
   * Transactions may begin: the assignment is current. The queued checkpoints of the tasks it
   * revoked fail first: made under the generation that revoked them, they must not commit under
   * the next one (whose TxnOffsetCommit the group's coordinator would accept). Their members are
   * revoked, so a checkpoint asked for later fails too: kafkajs rejoins from inside a fetch (stale
   * metadata) while other fetchers' handlers run, and nothing of a revoked task may commit under
   * the generation that revoked it, whatever the task does before it has closed.
   */
  open(revoked: Iterable<string> = []): void {
    const ids = new Set(revoked);
    for (const m of this.#members)
      if (ids.has(m.taskId)) {
        m.revoked = true;
        this.#members.delete(m);
      }
    this.#withdraw(ids);
    this.#meta = this.#d.groupMetadata();
    this.#first = true;
    this.#open = true;
    this.#schedule();
  }

  /** The group metadata of the assignment the gate was opened for; its first commit is logged. */
  #meta: GroupMetadata | undefined;
  #first = false;

  /**
   * No transaction begins until {@link open}: the member is about to rejoin. A transaction begun
   * ahead is given up: a rejoin can outlast its timeout, and the coordinator's abort would fence
   * the producer (every task in the next transaction would close as migrated).
   */
  shut(): void {
    this.#open = false;
    void this.#producer?.then(
      (p) => p.dropAhead(),
      () => undefined,
    );
  }

  /**
   * The member's rejoin failed (a JoinGroup refused, e.g. by a coordinator still loading after a
   * broker restart; kafkajs then fetches again for the assignment it had): the gate opens again
   * for that assignment, with the group metadata it was opened for, not kafkajs's live one (a
   * join that got through before a retry failed may have moved it to a generation whose
   * assignment this member never saw). Else its tasks' checkpoints would wait for an assignment
   * that never comes, and their batches behind them. If the group has moved on, the coordinator
   * refuses the transaction (fenced: the tasks close as migrated, the member rejoins).
   */
  reopen(): void {
    if (this.#open || this.#closed || this.#meta === undefined) return;
    this.#open = true;
    this.#schedule();
  }

  get isOpen(): boolean {
    return this.#open;
  }

  #withdraw(taskIds: ReadonlySet<string>): void {
    const out = this.#queue.filter((c) => taskIds.has(c.member.taskId));
    if (out.length === 0) return;
    this.#queue = this.#queue.filter((c) => !taskIds.has(c.member.taskId));
    for (const c of out)
      c.reject(new Error(`task ${c.member.taskId} was revoked before its checkpoint began`));
  }

  /** Settles when no transaction is in flight. */
  async idle(): Promise<void> {
    while (this.#flight !== undefined) await this.#settled;
  }

  #settled: Promise<void> = Promise.resolve();

  /** @internal A member's checkpoint: joins the next transaction. */
  enqueue(
    member: Member,
    records: TopicRecords,
    offsets: readonly TopicPartitionOffset[],
  ): Promise<WrittenOffsets> {
    if (this.#closed) return Promise.reject(new Error(`worker transactions ${this.transactionalId} closed`));
    if (member.revoked) return Promise.reject(new TaskMigratedError(member.taskId, new Error('revoked')));
    return new Promise<WrittenOffsets>((resolve, reject) => {
      this.#queue.push({ member, records, offsets, resolve, reject, at: performance.now() });
      this.#schedule();
    });
  }

  /** @internal The next transaction of a member's task begins ahead, where it can. */
  beginAhead(commitIntervalMs: number): void {
    if (!this.#open || this.#flight !== undefined || this.#queue.length > 0) return;
    void this.#producer?.then(
      (p) => {
        if (this.#open && this.#flight === undefined) p.begin(commitIntervalMs);
      },
      () => undefined,
    );
  }

  /** @internal A member closes: its queued checkpoints fail; a transaction holding it is given up. */
  async release(member: Member): Promise<void> {
    this.#members.delete(member);
    const mine = this.#queue.filter((c) => c.member === member);
    this.#queue = this.#queue.filter((c) => c.member !== member);
    for (const c of mine) c.reject(new Error(`task ${member.taskId} closed before its checkpoint began`));
    const flight = this.#flight;
    if (flight?.members.has(member)) {
      // Its records are in the transaction and the task's state goes back to its last checkpoint:
      // the transaction must not commit. Closing the producer fails it at once for every task in
      // it (each resets); the next producer's InitProducerId aborts it.
      this.#discard(flight.producer);
      await this.idle();
    }
  }

  /** Throws the producer away (closing it fails its transaction in flight); the next is made anew. */
  #discard(producer: TransactionalProducer): void {
    void this.#producer?.then(
      (p) => {
        if (p === producer) this.#producer = undefined;
      },
      () => undefined,
    );
    void producer.close().catch(() => undefined);
    // Made again at once: its InitProducerId aborts what the discarded one left open, which a
    // new owner of one of its tasks would otherwise wait out (the transaction timeout).
    queueMicrotask(() => {
      if (!this.#closed) this.ready().catch(() => undefined);
    });
  }

  #schedule(): void {
    if (this.#scheduled || this.#flight !== undefined || !this.#open || this.#queue.length === 0) return;
    this.#scheduled = true;
    // The task manager's checkpoints are queued in one synchronous run: a microtask takes them
    // all, and the Produce leaves now, not after the loop's next poll and the slices before it.
    queueMicrotask(() => {
      this.#scheduled = false;
      void this.#run();
    });
  }

  async #run(): Promise<void> {
    if (this.#flight !== undefined || !this.#open || this.#queue.length === 0 || this.#closed) return;
    let producer: TransactionalProducer;
    try {
      producer = await this.ready();
    } catch (e) {
      // Nothing was taken: what is queued fails (each task resets), the next one tries again.
      this.#failQueued(e);
      return;
    }
    // Taken, checked and marked in one turn: a revoked task's checkpoint withdrawn by `open`, a
    // reset task's released, a gate shut while the producer was being made all see it.
    if (this.#flight !== undefined || !this.#open || this.#queue.length === 0 || this.#closed) return;
    const batch = this.#queue;
    this.#queue = [];
    let first = Number.POSITIVE_INFINITY;
    for (const c of batch) first = Math.min(first, c.at);
    const queued = (performance.now() - first) / 1000;
    const members = new Set(batch.map((c) => c.member));
    this.#flight = { members, producer };
    let done!: () => void;
    this.#settled = new Promise<void>((r) => {
      done = r;
    });
    try {
      // The generation the assignment was made in (`open`), not kafkajs's live fields: a rejoin
      // moves those at JoinGroup, before this member knows which tasks it lost.
      const meta = this.#meta;
      if (meta === undefined)
        throw new Error('the worker is not a member of its group: no transaction begins');
      const records = new Map<string, OutRecord[]>();
      const offsets: TopicPartitionOffset[] = [];
      for (const c of batch) {
        for (const [topic, l] of c.records) {
          const into = records.get(topic);
          if (into === undefined) records.set(topic, l.slice());
          else for (let i = 0; i < l.length; i++) into.push(l[i]!);
        }
        for (const o of c.offsets) offsets.push(o);
      }
      pinTxnGroupMetadata(this.#d.transactionalId, meta, producer.identity?.());
      const written = await producer.commitTransaction(records, { groupId: this.#d.groupId, offsets });
      this.#d.counted?.(true, queued);
      if (this.#first) {
        this.#first = false;
        this.#d.logger.info(
          { generation: meta.generationId, tasks: [...members].map((m) => m.taskId).sort() },
          'first commit of the assignment',
        );
      }
      for (const c of batch) c.resolve(written);
    } catch (e) {
      this.#d.counted?.(false);
      for (const c of batch) c.reject(new WorkerTransactionError(c.member.taskId, e));
      this.#discard(producer);
      this.#d.logger.warn(
        { err: e, tasks: [...members].map((m) => m.taskId) },
        'worker transaction failed; its tasks go back to their last checkpoint',
      );
    } finally {
      this.#flight = undefined;
      done();
      this.#schedule();
    }
  }

  /** Fails every queued checkpoint (their tasks reset, or are closing anyway). */
  #failQueued(e: unknown): void {
    const queued = this.#queue;
    this.#queue = [];
    for (const c of queued) c.reject(new WorkerTransactionError(c.member.taskId, e));
  }

  /**
   * Fails the queued checkpoints: the worker stops without committing, or mid-rejoin, where they
   * would wait for a gate that may never open again.
   */
  dropQueued(): void {
    this.#failQueued(
      new Error(`worker transactions ${this.transactionalId}: stopping, nothing more commits`),
    );
  }

  /** Fails what is queued, gives up a transaction in flight, closes the producer. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#failQueued(new Error(`worker transactions ${this.transactionalId} closed`));
    const p = this.#producer;
    this.#producer = undefined;
    const producer = await p?.catch(() => undefined);
    await producer?.close().catch(() => undefined);
    await this.idle();
    retireTxnGroupMetadata(this.#d.transactionalId);
  }
}

/** One task's handle on its worker's transactions. */
class Member implements TaskTransactions {
  readonly taskId: string;
  readonly #w: WorkerTransactions;
  #closed = false;
  /** Its task was revoked (`WorkerTransactions.open`): nothing of it commits any more. */
  revoked = false;
  constructor(w: WorkerTransactions, taskId: string) {
    this.#w = w;
    this.taskId = taskId;
  }
  begin(commitIntervalMs: number): void {
    if (!this.#closed && !this.revoked) this.#w.beginAhead(commitIntervalMs);
  }
  partitionsOf(topic: string): number | undefined {
    return this.#w.partitionsOf(topic);
  }
  commitTransaction(
    records: TopicRecords,
    offsets: { groupId: string; offsets: readonly TopicPartitionOffset[] },
  ): Promise<WrittenOffsets> {
    if (this.#closed) return Promise.reject(new Error(`task ${this.taskId} closed`));
    return this.#w.enqueue(this, records, offsets.offsets);
  }
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#w.release(this);
  }
}
