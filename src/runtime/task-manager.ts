import type { SluiceConfig } from '../config/schema.js';
import { TaskMigratedError } from '../errors.js';
import type { KafkaClient } from '../kafka/client.js';
import type { BatchContext, GroupConsumer } from '../kafka/consumer.js';
import type { PlainProducer } from '../kafka/producer.js';
import { taskIdOf } from '../kafka/task-assigner.js';
import type { Logger } from '../ops/logger.js';
import type { WorkerMetrics } from '../ops/metrics.js';
import type { Topology } from '../topology/build.js';
import { AsyncBudget } from './async-stage.js';
import { awaitIdle, awaitReady, awaitRoom, processInSlices } from './batch-slices.js';
import type { InputRateMeter } from './input-rate.js';
import { checkpointBeforeRejoin } from './rejoin.js';
import { SliceSize } from './slice-size.js';
import { Task, type TaskDeps } from './task.js';
import type { TaskState } from './task-state.js';
import { deadLetterTopic } from './topics.js';
import type { TaskTransactions, WorkerTransactions } from './worker-transactions.js';

/** Opens a task's state; supplied by the state module (restore.ts). */
export type OpenState = (
  task: Task,
  ctx: { client: KafkaClient; metrics: WorkerMetrics; logger: Logger },
) => Promise<TaskState | undefined>;

/** What the parts of a worker (its task manager, its changelog watch) share of it. */
export interface WorkerParts {
  appId: string;
  topology: Topology;
  config: Readonly<SluiceConfig>;
  client: KafkaClient;
  logger: Logger;
  metrics: WorkerMetrics;
  /** True while the worker runs (what fails while it stops is not acted on). */
  isRunning: () => boolean;
}

export interface TaskManagerDeps extends WorkerParts {
  /** Opens a task's state (undefined: stateless jobs only). */
  openState?: OpenState | undefined;
  /** The worker's shared producer (at-least-once only). */
  plainProducer: () => Promise<PlainProducer>;
  /** The worker's group consumer, once started. */
  consumer: () => GroupConsumer | undefined;
  /** Records pushed into each operator, by graph node id (shared by the tasks). */
  opCounts: Float64Array;
  /** The worker's lag per `topic:partition`; a revoked partition's entry goes. */
  lag: Map<string, number>;
  inputRate: InputRateMeter;
  /** True when `e` made the worker fail over (a full disk): the task is not retried then. */
  failOverOnFullDisk: (task: Task, e: unknown) => boolean;
  /** A task's processing failed outside a batch (an async stage): the worker's policy decides. */
  taskFailed: (task: Task, e: unknown) => void;
  /** The worker failed (`fail` policy, full disk): nothing more commits (half a batch, say). */
  hasFailed?: () => boolean;
  /** Bound on a starting task's broker calls after its restore (default in `Task`). */
  startStepTimeoutMs?: number;
  /** Exactly-once v2: the worker's one producer and its transactions (worker-transactions.ts). */
  transactions?: WorkerTransactions | undefined;
}

/**
 * The tasks of one worker: created for the partitions the group assigns it, closed when they
 * are revoked, rebuilt with backoff when their init or reset fails. Under exactly-once v1 each
 * task fences the previous owner itself (its transactional producer) when it starts; under v2 the
 * worker's transactions are fenced by the group's generation (worker-transactions.ts).
 */
export class TaskManager {
  readonly #tasks = new Map<string, Task>();
  /** Each task's slice size, from its cost per record (slice-size.ts). */
  readonly #slices = new WeakMap<Task, SliceSize>();
  readonly #d: TaskManagerDeps;

  constructor(deps: TaskManagerDeps) {
    this.#d = deps;
    this.#asyncBudget = new AsyncBudget(deps.config.processing.asyncMaxBytes);
  }

  get tasks(): ReadonlyMap<string, Task> {
    return this.#tasks;
  }

  /** True while `task` is the one this worker runs under its id (not revoked, not replaced). */
  owns(task: Task): boolean {
    return this.#tasks.get(task.id) === task;
  }

  /** Each task's share of the worker's cache bound (`state.cacheMaxBytes`) at the current assignment. */
  cacheShare(): number {
    return Math.floor(this.#d.config.state.cacheMaxBytes / Math.max(1, this.#tasks.size));
  }

  #taskDeps(): TaskDeps {
    const d = this.#d;
    return {
      appId: d.appId,
      groupId: d.appId,
      config: d.config,
      client: d.client,
      logger: d.logger,
      metrics: d.metrics,
      plainProducer: d.plainProducer,
      openState: async (task) =>
        d.openState?.(task, { client: d.client, metrics: d.metrics, logger: task.logger }),
      seek: (topic, partition, offset) => d.consumer()?.seek(topic, partition, offset),
      deadLetterTopic: deadLetterTopic(d.appId),
      opCounts: d.opCounts,
      // The worker's record cache bound, shared out between its tasks (as `cacheShare`).
      recordCacheShare: () => Math.floor(d.config.state.recordCacheMaxBytes / Math.max(1, this.#tasks.size)),
      asyncBudget: this.#asyncBudget,
      asyncFailed: (task, e) => d.taskFailed(task, e),
      startStepTimeoutMs: d.startStepTimeoutMs,
      transactions: d.transactions && ((task) => this.#join(d.transactions!, task)),
    };
  }

  /** A starting task's handle on the worker's transactions, once its input offsets are stable. */
  #join(w: WorkerTransactions, task: Task): Promise<TaskTransactions> {
    const inputs = task.inputTopics.map((topic) => ({ topic, partitions: [task.partition] }));
    const bound = this.#d.startStepTimeoutMs ?? Math.max(60_000, 2 * this.#d.config.kafka.requestTimeoutMs);
    return w.join(task.id, inputs, bound);
  }

  /** The worker's bound on the bytes of records in its tasks' async stages. */
  readonly #asyncBudget: AsyncBudget;

  /** The generation of the last assignment (exactly-once v2). */
  #generation: number | undefined;
  /** True when this assignment's generation is not the one after the last's (the member was out). */
  #missedGeneration(): boolean {
    const g = this.#d.consumer()?.groupMetadata()?.generationId;
    const before = this.#generation;
    this.#generation = g;
    return g === undefined || (before !== undefined && g > before + 1);
  }

  /** The chain of assignments: each waits for the one before it to have closed its tasks. */
  #assigning: Promise<void> = Promise.resolve();

  /**
   * Closes the revoked tasks (their folders stay; each takes its final checkpoint, which commits
   * or is fenced by the new owner) and only then starts the added ones, so that a task never runs
   * twice on one worker and a new task's fence never races a checkpoint of this worker. The
   * added tasks exist at once (state `created`: a batch for them waits), their init follows.
   */
  onAssignment(assigned: Array<{ topic: string; partition: number }>): Promise<void> {
    const { appId, topology, metrics, logger } = this.#d;
    metrics.rebalances.inc({ app: appId });
    const wanted = new Map<string, { sub: number; partition: number }>();
    for (const { topic, partition } of assigned) {
      const sub = topology.subtopologyOf(topic);
      if (sub !== undefined) wanted.set(taskIdOf(sub, partition), { sub, partition });
    }
    // Exactly-once v2: a member that missed a generation (frozen past its session, it was out of
    // the group) lost every task meanwhile, the ones it gets back too: another member may have
    // run and committed them, and nothing fences this one's stale state under the new generation
    // (EOS v1's per-task fence did). They close without committing and start again (Kafka
    // Streams' onPartitionsLost). A revoked task commits nothing more (beforeRejoin committed
    // it), or its transaction would carry the new generation, which the coordinator accepts.
    const v2 = this.#d.transactions !== undefined;
    const lost = v2 && this.#missedGeneration();
    const revoked = [...this.#tasks.keys()].filter((id) => lost || !wanted.has(id));
    const added = [...wanted.keys()].filter((id) => lost || !this.#tasks.has(id));
    const generation = this.#d.consumer()?.groupMetadata()?.generationId;
    logger.info({ generation, tasks: [...wanted.keys()].sort(), added, revoked, lost }, 'assignment');
    const closing = revoked.map((id) => {
      const t = this.#tasks.get(id)!;
      this.#forget(t);
      // Its folder stays: if the task comes back, it replays only the changelog's tail.
      return this.#close(t, !v2 && this.#d.hasFailed?.() !== true).catch((e) =>
        logger.warn({ err: e, task: id }, 'closing revoked task failed'),
      );
    });
    const starting: Task[] = [];
    for (const id of added) {
      const { sub, partition } = wanted.get(id)!;
      const task = new Task(id, topology.subtopologies[sub]!, partition, this.#taskDeps());
      task.commitOffsetsAtLeastOnce = (offsets) => this.#d.consumer()!.commitOffsets(offsets);
      this.#tasks.set(id, task);
      starting.push(task);
    }
    // The bound is the worker's: the tasks it keeps get a new share (added ones get it at open).
    const share = this.cacheShare();
    for (const t of this.#tasks.values()) t.stateStore?.resizeCache?.(share);
    this.#updateTaskGauge();
    this.#d.transactions?.open(revoked); // the revoked tasks are gone: commits may go on
    const before = this.#assigning;
    this.#assigning = (async () => {
      await before;
      await Promise.all(closing);
      for (const t of starting) if (this.owns(t)) void this.#initTask(t);
    })();
    return this.#assigning;
  }

  /** Waits (in a batch handler) until `task` can process or is gone (batch-slices.ts). */
  awaitReady(task: Task, heartbeat: () => Promise<void>, running: () => boolean): Promise<void> {
    return awaitReady(task, heartbeat, () => running() && this.owns(task));
  }

  /** Waits (in a batch handler) until the task's async stages have room again (batch-slices.ts). */
  awaitRoom(task: Task, heartbeat: () => Promise<void>, running: () => boolean): Promise<void> {
    return awaitRoom(task, heartbeat, () => running() && this.owns(task));
  }

  /** Waits (in a batch handler) for the task's checkpoint in flight (batch-slices.ts). */
  awaitIdle(task: Task, heartbeat: () => Promise<void>, running: () => boolean): Promise<void> {
    return awaitIdle(task, heartbeat, () => running() && this.owns(task));
  }

  /** Processes a batch of one input partition, in slices (batch-slices.ts). */
  processBatch(task: Task, b: BatchContext, running: () => boolean): Promise<number> {
    let sizer = this.#slices.get(task);
    if (sizer === undefined) this.#slices.set(task, (sizer = new SliceSize()));
    // A heartbeat between slices that fails (a rebalance) ends the batch here, not in the worker's
    // catch (which would reset the task and abort its transaction in flight): kafkajs's own
    // heartbeat after the batch meets the rebalance again and rejoins. The rest is fetched again.
    let beat = true;
    const going = () => beat && running();
    const heartbeat = () => b.heartbeat().catch(() => void (beat = false));
    return processInSlices(task, b, going, {
      sizer,
      owns: (t) => this.owns(t),
      checkpoint: (t) => void this.checkpoint(t),
      awaitRoom: () => this.awaitRoom(task, heartbeat, going),
      awaitIdle: () => this.awaitIdle(task, heartbeat, going),
    });
  }

  /**
   * The worker's periodic tick, per task: processing-time timers and idleness moves, the
   * multi-input drain (`drain`, unless a checkpoint or an async stage is backlogged), and a
   * checkpoint once one is `due` (commit-pacer.ts).
   */
  tick(drain: (t: Task) => void, due: (t: Task) => boolean): void {
    for (const t of this.#tasks.values()) {
      try {
        t.tick();
        if (!t.checkpointBacklogged && !t.async.backlogged) drain(t);
      } catch (e) {
        this.#d.taskFailed(t, e);
      }
      if (t.state === 'running' && t.hasPending && due(t)) void this.checkpoint(t);
    }
  }

  /** Drops a task from this worker's books (it is closed by the caller). */
  #forget(t: Task): void {
    const { appId, metrics } = this.#d;
    this.#tasks.delete(t.id);
    for (const topic of t.inputTopics) {
      this.#d.lag.delete(`${topic}:${t.partition}`);
      this.#d.inputRate.remove(topic, t.partition);
      // The new owner reports this partition's lag; a stale copy here would double it in sums.
      metrics.lag.remove({ app: appId, topic, partition: String(t.partition) });
    }
  }

  /**
   * A task whose producer was fenced, or (v2) whose offsets the group refused for a stale
   * generation (Kafka Streams' TaskMigratedException): a newer owner has
   * the task, or is taking it, and this worker is a zombie for it. It is closed without
   * committing (whatever it did since its last checkpoint is the new owner's to redo), never
   * re-initialized on its own, and the worker rejoins the group: only a new generation that
   * assigns the task here again starts it again, with a new fence.
   */
  async migrated(task: Task, e: TaskMigratedError): Promise<void> {
    if (!this.owns(task)) return;
    this.#d.metrics.errors.inc({ app: this.#d.appId, kind: 'task_migrated' });
    this.#d.logger.warn(
      { err: e, task: task.id },
      'task migrated: fenced by a newer owner; closing it without committing and rejoining the group',
    );
    this.#forget(task);
    this.#updateTaskGauge();
    this.#d.consumer()?.requestRejoin();
    await this.#close(task, false);
  }

  /** Closed tasks not released yet, by id: one of the same id starts here only after (one fence). */
  readonly #closing = new Map<string, Promise<unknown>>();
  #close(task: Task, checkpoint: boolean): Promise<void> {
    const closed = task.close({ checkpoint });
    const waits = [this.#closing.get(task.id), closed.then(() => task.released)];
    const p = Promise.all(waits.map((w) => w?.catch(() => undefined))).then(() => {
      if (this.#closing.get(task.id) === p) this.#closing.delete(task.id);
    });
    this.#closing.set(task.id, p);
    return closed;
  }

  async #initTask(task: Task): Promise<void> {
    await this.#closing.get(task.id);
    if (!this.owns(task) || task.state !== 'created') return;
    task.init().then(
      () => this.#updateTaskGauge(),
      (e) => this.retryTask(task, 1, e),
    );
  }

  /** Rebuilds a task whose init or reset failed, with backoff, until it works or goes away. */
  retryTask(task: Task, attempt: number, cause: unknown): void {
    if (this.#tasks.get(task.id) !== task || task.state === 'closed') return;
    if (this.#d.failOverOnFullDisk(task, cause)) return;
    const delay = Math.min(500 * 2 ** (attempt - 1), 10_000);
    this.#d.logger.warn(
      { err: cause, task: task.id, attempt, retryInMs: delay },
      'task could not start; retrying',
    );
    this.#d.metrics.errors.inc({ app: this.#d.appId, kind: 'task_init' });
    setTimeout(() => {
      if (this.#tasks.get(task.id) !== task || task.state === 'closed') return;
      task.reset(cause).then(
        () => this.#updateTaskGauge(),
        (e) => this.retryTask(task, attempt + 1, e),
      );
    }, delay).unref();
  }

  /** Checkpoint failures handled: every caller of one checkpoint in flight (ticks, batches) meets it. */
  readonly #handled = new WeakSet<object>();
  /**
   * Checkpoints a task; one that fails is rebuilt from its last checkpoint (see `Task.reset`).
   * Every other running task with work to commit checkpoints now too, as Kafka Streams commits
   * all of a thread's tasks: under exactly-once v2 into the same transaction (one per worker and
   * interval), under at-least-once with their offsets in one request (offset-commits.ts).
   * Exactly-once v1 commits each task in its own transaction, on its own interval.
   */
  checkpoint(task: Task): Promise<void> {
    // A revoked task's batch handler may still be running (kafkajs rejoins from inside a fetch):
    // its last checkpoint is its close's (or none, exactly-once v2), never one from the handler.
    if (!this.owns(task) || this.#d.hasFailed?.() === true) return Promise.resolve();
    if (this.#d.transactions !== undefined || this.#d.config.processing.guarantee === 'at_least_once')
      for (const t of this.#tasks.values())
        if (t !== task && t.state === 'running' && t.hasPending) void this.#checkpoint(t);
    return this.#checkpoint(task);
  }

  async #checkpoint(task: Task): Promise<void> {
    try {
      await task.checkpoint();
    } catch (e) {
      if (typeof e === 'object' && e !== null && this.#handled.has(e)) return;
      if (typeof e === 'object' && e !== null) this.#handled.add(e);
      this.#d.metrics.checkpointFailures.inc({ app: this.#d.appId, reason: (e as Error).name ?? 'Error' });
      this.#d.metrics.errors.inc({ app: this.#d.appId, kind: 'checkpoint' });
      // (Exactly-once v2: the worker's transactions count theirs.)
      if (this.#d.config.processing.guarantee === 'exactly_once' && !this.#d.transactions)
        this.#d.metrics.txAborts.inc({ app: this.#d.appId });
      if (!this.owns(task) || !this.#d.isRunning()) return;
      if (e instanceof TaskMigratedError) return this.migrated(task, e);
      if (this.#d.failOverOnFullDisk(task, e)) return;
      // Anything else (broker gone, unknown commit result, a RocksDB write): nothing since the
      // last checkpoint is trusted. Rebuild the task from it, fencing again.
      task.reset(e).catch((e2) => this.retryTask(task, 1, e2));
    }
  }

  /** Before this member rejoins the group, its tasks checkpoint (rejoin.ts). */
  beforeRejoin(): Promise<void> {
    return checkpointBeforeRejoin(this.#tasks.values(), (t) => this.checkpoint(t), this.#d.transactions);
  }

  /** kafkajs gave the rejoin up: the assignment it had holds, and its checkpoints may commit again. */
  rejoinFailed(): void {
    this.#d.transactions?.reopen();
  }

  /**
   * A batch (or a timer tick) of `task` failed on Sluice's or the machine's side, not the user's
   * (a state read that failed or met a closing store): nothing of it was committed, and none of
   * it becomes a dead letter. The task is rebuilt from its last checkpoint, as after a failed
   * checkpoint; a full disk fails the worker over instead.
   */
  processingFailed(task: Task, e: unknown): void {
    // Also while the worker starts (batches are processed then): what the failed batch applied
    // before the fault must never reach a checkpoint, or its records would count twice.
    if (!this.owns(task)) return;
    if (this.#d.failOverOnFullDisk(task, e)) return;
    this.#d.metrics.errors.inc({ app: this.#d.appId, kind: 'processing' });
    task.reset(e).catch((e2) => this.retryTask(task, 1, e2));
  }

  #updateTaskGauge(): void {
    const counts: Record<string, number> = { restoring: 0, running: 0 };
    for (const t of this.#tasks.values()) counts[t.state] = (counts[t.state] ?? 0) + 1;
    for (const [state, n] of Object.entries(counts))
      this.#d.metrics.tasks.set({ app: this.#d.appId, state }, n);
  }

  /** Closes every task (checkpointing first when asked) and forgets them: the worker stops. */
  async closeAll(opts: { checkpoint: boolean }): Promise<void> {
    const tasks = [...this.#tasks.values()];
    const checkpoint = opts.checkpoint && (this.#d.transactions?.isOpen ?? true); // v2: not mid-rejoin
    if (!checkpoint) this.#d.transactions?.dropQueued();
    await Promise.all(tasks.map((t) => t.close({ checkpoint })));
    this.#tasks.clear();
    await this.#d.transactions?.close();
  }
}
