import type { SluiceConfig } from '../config/schema.js';
import type { KafkaClient } from '../kafka/client.js';
import type { PlainProducer } from '../kafka/producer.js';
import type { InRecord, TopicPartitionOffset } from '../kafka/types.js';
import type { Logger } from '../ops/logger.js';
import type { WorkerMetrics } from '../ops/metrics.js';
import { OperatorCostSampler } from '../overload/operator-cost.js';
import { TaskShedder } from '../overload/shedder.js';
import type { SubTopology } from '../topology/build.js';
import { AsyncBudget } from './async-stage.js';
import { type CheckpointDeps, writeCheckpoint } from './checkpoint.js';
import { deferred } from './deferred.js';
import type { Op } from './operators.js';
import type { RecordCache } from './record-cache.js';
import { MutableRecordContext } from './record-context.js';
import type { RecordLoop } from './record-loop.js';
import { type StartWatch, watchStart } from './start-watch.js';
import { TaskAsyncStages } from './task-async.js';
import { startInputs } from './task-inputs.js';
import { taskParts } from './task-operators.js';
import { TaskProgress } from './task-progress.js';
import type { TaskState } from './task-state.js';
import { type TaskStateName, transition } from './task-states.js';
import { overflowTopic } from './topics.js';
import type { TaskTransactions } from './worker-transactions.js';

export { TASK_STATES, type TaskStateName } from './task-states.js';

export interface TaskDeps {
  appId: string;
  groupId: string;
  config: Readonly<SluiceConfig>;
  client: KafkaClient;
  logger: Logger;
  metrics: WorkerMetrics;
  /** The worker's shared producer (at-least-once only). */
  plainProducer: () => Promise<PlainProducer>;
  /** Opens and restores the task's state (none when the sub-topology has no stores). */
  openState: (task: Task) => Promise<TaskState | undefined>;
  /** Seeks the group consumer of this worker. */
  seek: (topic: string, partition: number, offset: string) => void;
  deadLetterTopic: string;
  /** Records pushed into each operator, by graph node id; shared by the worker's tasks (/status). */
  opCounts?: Float64Array;
  /** The wall clock for processing time (default `Date.now`): a test driver passes its own. */
  now?: () => number;
  /** This task's share of `state.recordCacheMaxBytes` (default: all of it). */
  recordCacheShare?: () => number;
  /** The worker's bound on the bytes in async stages (default: one of the task's own). */
  asyncBudget?: AsyncBudget;
  /** An async stage's record failed past the error policy; default: the task resets. */
  asyncFailed?: (task: Task, e: unknown) => void;
  /** Exactly-once v2: the task's handle on its worker's transactions (else its own producer). */
  transactions?: ((task: Task) => Promise<TaskTransactions>) | undefined;
  /** Bound on a start's broker calls after the restore (default 2 × request timeout, ≥ 60 s). */
  startStepTimeoutMs?: number | undefined;
}

/**
 * A task: one partition of one sub-topology's input topics. It owns its operators, its keyed
 * state and (exactly-once v1) its transactional producer `<appId>-<taskId>`, whose epoch fences
 * any zombie that still thinks it owns the task; under v2 it commits through its worker's.
 *
 * States (allowed moves):
 *     created ──init()──▶ restoring ──▶ running ──close()──▶ closed
 *                              ▲            │
 *                              └──reset()───┘   (a failed checkpoint: rebuild from the last one)
 */
export class Task {
  readonly id: string;
  readonly partition: number;
  readonly sub: SubTopology;
  readonly logger: Logger;
  #state: TaskStateName = 'created';
  readonly #deps: TaskDeps;
  readonly #eos: boolean;
  readonly #rc = new MutableRecordContext();
  /** Offsets, outputs and event time since the last checkpoint. */
  readonly #progress: TaskProgress;
  readonly #loop: RecordLoop;
  readonly #checkpointDeps: CheckpointDeps;
  readonly #afterBatch: () => void;
  readonly #compile: ReturnType<typeof taskParts>['compile'];
  #ops = new Map<string, Op>();
  #producer: TaskTransactions | undefined;
  #store: TaskState | undefined;
  #busy: Promise<void> | undefined;
  #ready: Promise<void> | undefined;
  /** Overload: the drop decisions and the busy-time counters the overload controller reads. */
  readonly shedder: TaskShedder;
  /** Overload: per-operator cost, timed on a sample of records. */
  readonly costs = new OperatorCostSampler();
  /** Aggregations' updates, one per key until the next checkpoint (record-cache.ts). */
  readonly #recordCache: RecordCache;
  /** The async stages (mapAsync, ...) of the current compile (task-async.ts). */
  readonly #async: TaskAsyncStages;

  constructor(id: string, sub: SubTopology, partition: number, deps: TaskDeps) {
    this.id = id;
    this.sub = sub;
    this.partition = partition;
    this.#deps = deps;
    this.#eos = deps.config.processing.guarantee === 'exactly_once';
    this.logger = deps.logger.child({ task: id });
    this.#rc.partition = partition;
    if (deps.now) this.#rc.now = deps.now;
    this.shedder = new TaskShedder({ ...deps.config.overload, overflowTopic: overflowTopic(deps.appId) });
    this.#progress = new TaskProgress(deps.config.processing, sub, deps.client.recordLimits);
    const parts = taskParts({
      ...deps,
      taskId: id,
      partition,
      sub,
      eos: this.#eos,
      logger: this.logger,
      rc: this.#rc,
      progress: this.#progress,
      shedder: this.shedder,
      costs: this.costs,
      moveWatermark: () => this.#moveWatermark(),
      commitOffsets: (offsets) => this.commitOffsetsAtLeastOnce(offsets),
    });
    this.#loop = parts.loop;
    this.#recordCache = parts.recordCache;
    this.#checkpointDeps = parts.checkpointDeps;
    this.#afterBatch = parts.afterBatch;
    this.#compile = parts.compile;
    this.#async = new TaskAsyncStages({
      appId: deps.appId,
      taskId: id,
      metrics: deps.metrics,
      shedder: this.shedder,
      budget: deps.asyncBudget ?? new AsyncBudget(deps.config.processing.asyncMaxBytes),
      fail: (e) => (deps.asyncFailed ? deps.asyncFailed(this, e) : void this.reset(e).catch(() => undefined)),
    });
  }

  /** Next offset to process on an input topic (for lag), once known. */
  positionOf(topic: string): bigint | undefined {
    return this.#progress.next.get(topic);
  }

  get state(): TaskStateName {
    return this.#state;
  }

  /** Re-read after awaits: close() may have run meanwhile. */
  get isClosed(): boolean {
    return this.#state === 'closed';
  }

  readonly #closing = new AbortController();
  /** Settles once a closed task's start in flight, if any, has let go of its producer and folder. */
  released: Promise<void> = Promise.resolve();
  /** Aborted by close(): a restore in flight stops at its next fetch. */
  readonly closeSignal: AbortSignal = this.#closing.signal;

  get inputTopics(): readonly string[] {
    return this.sub.sourceTopics;
  }

  /** Changelog records to replay, set by the state restore (for /status); undefined: no state. */
  restoreProgress: { total: number; remaining: number } | undefined;
  /** Next offset to process per input topic (for /status); null before the first assignment. */
  positions(): Record<string, string | null> {
    return this.#progress.positions(this.sub.sourceTopics);
  }

  /** The task's state stores (for queries and metrics), once restored. */
  get stateStore(): TaskState | undefined {
    return this.#store;
  }

  #to(next: TaskStateName): void {
    this.#state = transition(this.id, this.#state, next);
  }

  /** Starts the task: fence, restore state, find the input offsets. Called by the task manager once,
   *  when a generation assigns it here (after revoked tasks closed); retried through {@link reset}. */
  init(): Promise<void> {
    this.#ready = this.#init();
    this.#ready.then(this.#started.resolve, this.#started.reject);
    return this.#ready;
  }

  /** Settles with the first init: a batch may ask before the task manager has started it. */
  readonly #started = deferred();

  /** Resolves when the task can process (or rejects if it could not be restored). */
  whenReady(): Promise<void> {
    return this.#ready ?? this.#started.promise;
  }

  async #init(): Promise<void> {
    if (this.#state !== 'restoring') this.#to('restoring');
    await watchStart(
      this.logger,
      () => this.restoreProgress,
      (w) => this.#start(w),
    );
  }

  async #start(watch: StartWatch): Promise<void> {
    const started = Date.now();
    // 1. Fence: InitProducerId with the task's transactional id aborts or waits out the previous owner's
    //    transaction, so the offsets read below are stable (EOS v2: stable offsets). Not if revoked.
    if (this.isClosed) return;
    if (this.#eos) {
      const { transactions, client, appId } = this.#deps;
      this.#producer = await (transactions?.(this) ?? client.transactionalProducer(`${appId}-${this.id}`));
      if (this.isClosed) return this.#release();
      this.#progress.batchWith(this.#producer);
    }
    // 2. Local state, replayed from the changelogs to their end.
    watch.step = 'restore';
    this.#store = await this.#deps.openState(this);
    if (this.isClosed) return this.#release();
    // 3. Input offsets (and event times, upstream writers' watermarks), bounded; the operators.
    watch.step = 'input offsets';
    const { client, groupId, config } = this.#deps;
    const seek = (t: string, o: string) => this.#deps.seek(t, this.partition, o);
    const bound = this.#deps.startStepTimeoutMs ?? Math.max(60_000, 2 * config.kafka.requestTimeoutMs);
    await startInputs(client, groupId, this, this.#progress, this.#rc, seek, bound);
    watch.step = 'operators';
    this.#recordCache.clear();
    this.#ops = this.#compile(this.#store, this.#async.deps(this.#loop.asyncGuard), this.#async.fresh());
    this.#progress.lastCheckpoint = Date.now();
    if (this.isClosed) return this.#release();
    this.#to('running');
    this.#async.start();
    this.#moveWatermark();
    this.logger.info({ ms: Date.now() - started, offsets: this.positions() }, 'task running');
  }

  /** Waits for a checkpoint in flight. */
  async idle(): Promise<void> {
    // A failed checkpoint is handled by whoever started it (the worker resets the task); a batch that
    // only waits must not fail too (kafkajs would crash the consumer on a non-retriable error).
    while (this.#busy) await this.#busy.catch(() => undefined);
  }

  get hasPending(): boolean {
    const p = this.#progress;
    const held = this.#recordCache.size > 0 || (this.#store?.dirty ?? false) || this.#async.dirty;
    return p.dirtyRecords > 0 || p.collector.count > 0 || held || p.announceDue;
  }

  /** Ms since the last checkpoint started (commit-pacer.ts), and whether a commit interval passed. */
  get sinceCheckpoint(): number {
    return Date.now() - this.#progress.lastCheckpoint;
  }
  get checkpointDue(): boolean {
    return this.sinceCheckpoint >= this.#deps.config.processing.commitIntervalMs;
  }

  /** A checkpoint in flight for a whole commit interval (a slow broker): batches wait meanwhile,
   *  so the work queued behind a commit stays bounded (else they go on into the next one). */
  get checkpointBacklogged(): boolean {
    return this.#busy !== undefined && this.checkpointDue;
  }

  /** The async stages: backpressure (`backlogged`, `room()`), records in flight (/status). */
  get async(): Pick<TaskAsyncStages, 'backlogged' | 'room' | 'size' | 'drained' | 'chunk'> {
    return this.#async;
  }

  /** Processes a batch of one input partition, synchronously, from the task's position on (record-loop.ts). */
  process(topic: string, records: InRecord[], resolveOffset: (o: string) => void): number {
    if (this.#state !== 'running') return 0;
    const n = this.#loop.process(this.#ops, topic, records, resolveOffset);
    this.#afterBatch(); // the record cache's eviction; at-least-once: the outputs go now
    if (n > 0) this.#producer?.begin(this.#deps.config.processing.commitIntervalMs); // exactly-once
    return n;
  }

  get watermark(): number | undefined {
    return this.#progress.watermark.value;
  }
  /** Stream inputs idle now (`processing.idleTimeoutMs`): they do not hold the watermark (/status). */
  get idleInputs(): string[] {
    return this.#progress.watermark.idleTopics(this.#rc.now());
  }

  /** Moves the watermark (times, idleness); fires the timers it passes (on the tick, `now`'s too). */
  #moveWatermark(now?: number): void {
    const w = this.#progress.advanceWatermark(this.#rc.now());
    if (w !== undefined) this.#rc.watermark = w;
    // Each due timer runs through the record loop's guard: clean context, rollback, error policy.
    if (w !== undefined || now !== undefined) this.#store?.advanceTime(w, now, this.#loop.timerGuard);
  }

  /** Periodic work without input: processing-time timers, idleness moves. Throws like `process`. */
  tick(): void {
    if (this.#state === 'running') this.#moveWatermark(this.#rc.now());
    this.#async.publish();
  }

  /** Commits outputs, changelog records and input offsets (one transaction under exactly-once,
   *  in that order under at-least-once), then, and only then, the RocksDB batch (checkpoint.ts). */
  checkpoint(): Promise<void> {
    if (this.#busy) return this.#busy;
    if (this.#state === 'running' && this.#recordCache.size > 0) {
      try {
        this.flushRecordCache();
      } catch (e) {
        return Promise.reject(e);
      }
    }
    // The watermark, to repartition readers (after the flushed updates it covers).
    if (this.#state === 'running') this.#progress.announce();
    if (this.#state !== 'running' || !this.hasPending) {
      this.#progress.lastCheckpoint = Date.now();
      return Promise.resolve();
    }
    const p = writeCheckpoint(
      this.#checkpointDeps,
      this.#progress,
      () => this.#store,
      this.#producer,
    ).finally(() => {
      this.#busy = undefined;
    });
    this.#busy = p;
    return p;
  }

  /** Sends the aggregations' held updates downstream (into this checkpoint). Throws like `process`. */
  flushRecordCache(): void {
    if (this.#state === 'running' && !this.#busy) this.#recordCache.flush();
  }

  /** Commits offsets through the group; filled in by the worker (it owns the consumer). */
  commitOffsetsAtLeastOnce: (offsets: TopicPartitionOffset[]) => Promise<void> = async () => undefined;

  /**
   * Throws away everything since the last checkpoint and starts over from it: a new producer
   * (fencing again), state back to RocksDB's view, input from the committed offsets. Never for a
   * migrated task (the task manager closes that one). The task leaves `running` at once, through
   * the table: a batch arriving meanwhile waits (`whenReady`) instead of meeting a closing store.
   */
  reset(reason: unknown): Promise<void> {
    // Failures come from several places at once (checkpoint, init retry): one reset at a time.
    if (this.#resetting) return this.#resetting;
    if (this.#state === 'closed') return Promise.resolve();
    const before = this.#ready;
    if (this.#state !== 'restoring') this.#to('restoring');
    this.#async.close(); // what is in flight comes back from the last checkpoint's store
    const p = this.#reset(reason, before).finally(() => {
      if (this.#resetting === p) this.#resetting = undefined;
    });
    this.#resetting = p;
    this.#ready = p;
    return p;
  }

  #resetting: Promise<void> | undefined;

  async #reset(reason: unknown, before: Promise<void> | undefined): Promise<void> {
    await before?.catch(() => undefined);
    // Not waiting for a checkpoint in flight: closing the producer below fails its transaction
    // at once (it may be stuck in kafkajs's retries, e.g. on a deleted changelog).
    if (this.isClosed) return;
    this.logger.warn({ err: reason }, 'task resets to its last checkpoint');
    this.#progress.clear();
    this.#recordCache.clear();
    await this.#release();
    if (this.isClosed) return;
    await this.#init();
  }

  /** Checkpoints (when asked and possible) and releases the producer and the state folder. */
  async close(opts: { checkpoint: boolean }): Promise<void> {
    if (this.#state === 'closed') return;
    await this.idle();
    if (opts.checkpoint && this.#state === 'running') {
      try {
        await this.checkpoint();
      } catch (e) {
        this.logger.warn({ err: e }, 'final checkpoint failed; the next owner resumes from the last one');
      }
    }
    this.#to('closed');
    this.#closing.abort();
    this.#async.close();
    this.#progress.clear();
    // A start in flight stops at its next step and lets go of what it opened: `released` waits.
    if (this.#ready) this.released = this.#ready.catch(() => undefined).then(() => this.#release());
    await this.#release(opts.checkpoint);
    this.logger.info('task closed');
  }

  async #release(clean = false): Promise<void> {
    const producer = this.#producer;
    const store = this.#store;
    this.#producer = undefined;
    this.#store = undefined;
    await producer?.close();
    await store?.close({ clean });
  }
}
