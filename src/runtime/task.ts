import type { SluiceConfig } from '../config/schema.js';
import { SluiceError } from '../errors.js';
import type { KafkaClient } from '../kafka/client.js';
import type { PlainProducer, TransactionalProducer } from '../kafka/producer.js';
import type { InRecord, TopicPartitionOffset } from '../kafka/types.js';
import type { Logger } from '../ops/logger.js';
import type { WorkerMetrics } from '../ops/metrics.js';
import { OperatorCostSampler } from '../overload/operator-cost.js';
import { createShedOp } from '../overload/shed-op.js';
import { TaskShedder } from '../overload/shedder.js';
import type { SubTopology } from '../topology/build.js';
import { type CheckpointDeps, writeCheckpoint } from './checkpoint.js';
import { deferred } from './deferred.js';
import { compileOperators, type Op } from './operators.js';
import { MutableRecordContext } from './record-context.js';
import { RecordLoop } from './record-loop.js';
import { TaskProgress } from './task-progress.js';
import type { TaskState } from './task-state.js';
import { overflowTopic } from './topics.js';
import { committedFloor, watermarkTopics } from './watermark.js';

/**
 * A task: one partition of one sub-topology's input topics. It owns its operators, its keyed
 * state and (under exactly-once) its transactional producer `<appId>-<taskId>`, whose epoch
 * fences any zombie that still thinks it owns the task.
 *
 * States (allowed moves):
 *
 *     created ──init()──▶ restoring ──▶ running ──close()──▶ closed
 *                              ▲            │
 *                              └──reset()───┘   (a failed checkpoint: rebuild from the last one)
 */
export const TASK_STATES = ['created', 'restoring', 'running', 'closed'] as const;
export type TaskStateName = (typeof TASK_STATES)[number];
const TRANSITIONS: Record<TaskStateName, readonly TaskStateName[]> = {
  created: ['restoring', 'closed'],
  restoring: ['running', 'restoring', 'closed'],
  running: ['restoring', 'closed'],
  closed: [],
};

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
}

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
  #ops = new Map<string, Op>();
  #producer: TransactionalProducer | undefined;
  #store: TaskState | undefined;
  #busy: Promise<void> | undefined;
  #ready: Promise<void> | undefined;
  /** Overload: the drop decisions and the busy-time counters the overload controller reads. */
  readonly shedder: TaskShedder;
  /** Overload: per-operator cost, timed on a sample of records. */
  readonly costs = new OperatorCostSampler();

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
    this.#progress = new TaskProgress(deps.config.processing, sub);
    this.#loop = new RecordLoop({
      appId: deps.appId,
      partition,
      sub,
      rc: this.#rc,
      progress: this.#progress,
      shedder: this.shedder,
      costs: this.costs,
      metrics: deps.metrics,
      moveWatermark: () => this.#moveWatermark(),
      deadLetter: {
        policy: deps.config.processing.errorPolicy,
        logger: this.logger,
        deadLetterTopic: deps.deadLetterTopic,
        seen: new Set<string>(),
      },
    });
    this.#checkpointDeps = {
      appId: deps.appId,
      taskId: id,
      groupId: deps.groupId,
      partition,
      eos: this.#eos,
      logger: this.logger,
      metrics: deps.metrics,
      deadLetterTopic: deps.deadLetterTopic,
      overflowTopic: this.shedder.overflowTopic,
      plainProducer: () => deps.plainProducer(),
      commitOffsets: (offsets) => this.commitOffsetsAtLeastOnce(offsets),
    };
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

  get inputTopics(): readonly string[] {
    return this.sub.sourceTopics;
  }

  /** Changelog records to replay, set by the state restore (for /status); undefined: no state. */
  restoreProgress: { total: number; remaining: number } | undefined;

  /** Next offset to process per input topic (for /status); null before the first assignment. */
  positions(): Record<string, string | null> {
    const out: Record<string, string | null> = {};
    for (const t of this.sub.sourceTopics) out[t] = this.#progress.next.get(t)?.toString() ?? null;
    return out;
  }

  /** The task's state stores (for queries and metrics), once restored. */
  get stateStore(): TaskState | undefined {
    return this.#store;
  }

  #to(next: TaskStateName): void {
    if (!TRANSITIONS[this.#state].includes(next)) {
      throw new SluiceError(
        'SLUICE_TASK_CORRUPTED',
        `task ${this.id}: illegal transition ${this.#state} → ${next}`,
      );
    }
    this.#state = next;
  }

  /**
   * Starts the task: fence, restore state, find the input offsets. Called by the task manager
   * once, when a generation assigns the task to this worker (after the tasks it revoked have
   * closed); a failed init is retried through {@link reset}.
   */
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
    const started = Date.now();
    // 1. Fence: InitProducerId with the task's transactional id aborts or waits out the previous
    //    owner's transaction, so the offsets read below are stable (kafkajs has no RequireStable).
    if (this.#eos) {
      this.#producer = await this.#deps.client.transactionalProducer(`${this.#deps.appId}-${this.id}`);
    }
    // 2. Local state, replayed from the changelogs to their end.
    this.#store = await this.#deps.openState(this);
    if (this.isClosed) return this.#release();
    // 3. Input offsets, and the operators.
    const admin = await this.#deps.client.admin();
    const committed = await admin.committedOffsets(this.#deps.groupId, this.sub.sourceTopics);
    const wm = this.#progress.watermark;
    const mine = committed.filter((o) => o.partition === this.partition);
    wm.reset(watermarkTopics(this.sub), this.#rc.now(), committedFloor(mine.map((o) => o.metadata)));
    this.#rc.watermark = wm.value;
    for (const topic of this.sub.sourceTopics) {
      const c = mine.find((o) => o.topic === topic);
      wm.restore(topic, c?.metadata);
      let off = c && BigInt(c.offset) >= 0n ? BigInt(c.offset) : undefined;
      if (off === undefined) {
        // No commit yet: start at the log's start, explicitly, so that a reset goes back there too.
        const low = (await admin.offsets(topic)).find((p) => p.partition === this.partition)?.low;
        off = BigInt(low ?? '0');
      }
      this.#progress.next.set(topic, off);
      this.#deps.seek(topic, this.partition, off.toString());
    }
    this.#progress.clear();
    await this.#progress.openAnnounce(admin, this.partition);
    const app = this.#deps.appId;
    this.#ops = compileOperators(
      this.sub.sources,
      this.#rc,
      this.#progress.collector,
      (node, down, late) => {
        if (!this.#store)
          throw new SluiceError(
            'SLUICE_TOPOLOGY_INVALID',
            `operator ${node.name} needs state but the task has none`,
          );
        return this.#store.processOp(node, down, this.#rc, this.#progress.collector, late);
      },
      { late: (operator, action) => this.#deps.metrics.lateRecords.inc({ app, operator, action }) },
      this.#deps.opCounts,
      (node, down) =>
        createShedOp(node, down, { shedder: this.shedder, rc: this.#rc, emitter: this.#progress.collector }),
      this.costs,
    );
    this.#progress.lastCheckpoint = Date.now();
    if (this.isClosed) return this.#release();
    this.#to('running');
    this.#moveWatermark();
    this.logger.info(
      {
        ms: Date.now() - started,
        offsets: Object.fromEntries(
          [...this.#progress.next].map(([t, o]) => [t, o?.toString() ?? 'earliest']),
        ),
      },
      'task running',
    );
  }

  /** Waits for a checkpoint in flight. */
  async idle(): Promise<void> {
    // A failed checkpoint is handled by whoever started it (the worker resets the task); a batch that
    // only waits must not fail too (kafkajs would crash the consumer on a non-retriable error).
    while (this.#busy) await this.#busy.catch(() => undefined);
  }

  /** A checkpoint is in flight (nothing is processed meanwhile). */
  get busy(): boolean {
    return this.#busy !== undefined;
  }

  get hasPending(): boolean {
    const p = this.#progress;
    return p.dirtyRecords > 0 || p.collector.count > 0 || (this.#store?.dirty ?? false) || p.announceDue;
  }

  get checkpointDue(): boolean {
    return Date.now() - this.#progress.lastCheckpoint >= this.#deps.config.processing.commitIntervalMs;
  }

  /** Processes a batch of one input partition, synchronously, from the task's position on (record-loop.ts). */
  process(topic: string, records: InRecord[], resolveOffset: (o: string) => void): number {
    if (this.#state !== 'running') return 0;
    return this.#loop.process(this.#ops, topic, records, resolveOffset);
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
    if (w !== undefined || now !== undefined) this.#fireTimers(w, now);
  }

  /** Each due timer runs through the record loop's guard: clean context, rollback, error policy. */
  #fireTimers(watermark: number | undefined, now: number | undefined): void {
    this.#store?.advanceTime(watermark, now, this.#loop.timerGuard);
  }

  /** Periodic work without input: processing-time timers, idleness moves. Throws like `process`. */
  tick(): void {
    if (this.#state === 'running' && !this.#busy) this.#moveWatermark(this.#rc.now());
  }

  /**
   * Commits what the task did since the last checkpoint: outputs, changelog records and input
   * offsets in one transaction (exactly-once) or in that order (at-least-once); then, and only
   * then, the local RocksDB batch (see checkpoint.ts).
   */
  checkpoint(): Promise<void> {
    if (this.#busy) return this.#busy;
    if (this.#state === 'running') this.#progress.announce(); // the watermark, to repartition readers
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
        this.logger.warn(
          { err: e },
          'final checkpoint failed; the next owner continues from the previous one',
        );
      }
    }
    this.#to('closed');
    this.#progress.clear();
    await this.#release();
    this.logger.info('task closed');
  }

  async #release(): Promise<void> {
    const producer = this.#producer;
    const store = this.#store;
    this.#producer = undefined;
    this.#store = undefined;
    await producer?.close();
    await store?.close();
  }
}
