import { hostname } from 'node:os';
import type { Registry } from 'prom-client';
import type { App } from '../api/app.js';
import type { SluiceConfig } from '../config/schema.js';
import { SluiceError } from '../errors.js';
import { KafkaClient } from '../kafka/client.js';
import { type BatchContext, beforeBatch, type GroupConsumer } from '../kafka/consumer.js';
import type { PlainProducer } from '../kafka/producer.js';
import { isAuthError } from '../kafka/security.js';
import { type MemberInfo, taskIdOf } from '../kafka/task-assigner.js';
import { GroupView } from '../ops/group-view.js';
import type { Logger } from '../ops/logger.js';
import { createWorkerMetrics, initWorkerMetrics, type WorkerMetrics } from '../ops/metrics.js';
import { readinessOf } from '../ops/readiness.js';
import { buildStatus, type StatusSection } from '../ops/status.js';
import { OverloadController } from '../overload/controller.js';
import { validateOverload } from '../overload/validate.js';
import { prepareSchemas } from '../registry/prepare.js';
import { StateIoError } from '../state/errors.js';
import type { Topology } from '../topology/build.js';
import { ChangelogWatch } from './changelog-watch.js';
import { CommitPacer } from './commit-pacer.js';
import { InputRateMeter } from './input-rate.js';
import { type InputSyncs, workerSyncs } from './input-sync.js';
import { workerTransactions } from './make-worker-transactions.js';
import { RepartitionPurge } from './repartition-purge.js';
import { retrying } from './retrying.js';
import type { Task } from './task.js';
import { type OpenState, TaskManager, type WorkerParts } from './task-manager.js';
import type { PartitionPlan } from './topics.js';
import { prepareAndRecord } from './topology-record.js';

/**
 * A worker: one member of the app's consumer group, running one task per assigned partition of
 * each sub-topology.
 *
 *     created ──start()──▶ starting ──▶ running ──stop()──▶ stopping ──▶ stopped
 *                              │            │
 *                              └────────────┴──(fatal error)──▶ failed
 */
export const WORKER_STATES = ['created', 'starting', 'running', 'stopping', 'stopped', 'failed'] as const;
export type WorkerStateName = (typeof WORKER_STATES)[number];

export interface WorkerOptions {
  app: App;
  config: Readonly<SluiceConfig>;
  logger: Logger;
  registry: Registry;
  /** Opens a task's state; supplied by the state module (undefined: stateless jobs only). */
  openState?: OpenState;
  /** Called when the worker fails for good (the CLI exits non-zero). */
  onFatal?: (err: Error) => void;
  /** The HTTP address this worker advertises to the group (for routed state queries). */
  httpAddress?: () => string | undefined;
  /** KIP-345 static membership (see instance-id.ts): the id, and whether stop() leaves the group. */
  groupInstanceId?: string | undefined;
  leaveGroupOnStop?: boolean;
}

export class Worker {
  readonly app: App;
  readonly topology: Topology;
  readonly config: Readonly<SluiceConfig>;
  readonly logger: Logger;
  readonly metrics: WorkerMetrics;
  readonly client: KafkaClient;
  #state: WorkerStateName = 'created';
  readonly #running = () => this.#state === 'running';
  #consumer: GroupConsumer | undefined;
  #plain: Promise<PlainProducer> | undefined;
  readonly #manager: TaskManager;
  #plan: PartitionPlan = new Map();
  #assignedOnce = false;
  #joinSince = 0;
  #timer: NodeJS.Timeout | undefined;
  readonly #changelogs: ChangelogWatch;
  #members = new Map<string, MemberInfo>();
  readonly #opts: WorkerOptions;
  /** Each input partition's lag at its last fetch (`topic:partition`). */
  readonly lag = new Map<string, number>();
  #fatal: Error | undefined;
  readonly #inputRate: InputRateMeter;
  /** The whole group's assignment and HTTP addresses (for /status and routed state queries). */
  readonly group: GroupView;
  /** Records pushed into each operator since start, by graph node id (the status page's rates). */
  readonly opCounts: Float64Array;
  readonly clientId: string;
  #memberId: string | undefined;
  readonly statusSections = new Map<string, StatusSection>();
  #overload: OverloadController | undefined;
  #purge: RepartitionPurge | undefined;
  /** Timestamp order across a task's inputs (input-sync.ts); none for one-input tasks. */
  readonly #syncs: InputSyncs;
  readonly #pacer: CommitPacer;

  constructor(opts: WorkerOptions) {
    this.#opts = opts;
    this.app = opts.app;
    this.topology = opts.app.topology();
    this.config = opts.config;
    this.logger = opts.logger.child({ app: this.app.id });
    this.metrics = createWorkerMetrics(opts.registry);
    initWorkerMetrics(this.metrics, this.app.id, this.app.graph.nodes);
    this.#inputRate = new InputRateMeter(this.metrics, this.app.id);
    this.#syncs = workerSyncs(opts.config.processing, () => this.#consumer, this.#inputRate);
    this.#pacer = new CommitPacer(opts.config.processing, this.lag);
    const clientId = `${opts.config.kafka.clientId}-${this.app.id}-${hostname()}-${process.pid}`;
    this.client = new KafkaClient({ ...opts.config.kafka, clientId }, this.logger);
    this.clientId = clientId;
    this.group = new GroupView(
      () => this.client.admin(),
      this.app.id,
      this.topology,
      () => this.#state === 'running' && this.#assignedOnce,
    );
    const maxNode = Math.max(...this.topology.subtopologies.flatMap((s) => s.nodes.map((n) => n.id)));
    this.opCounts = new Float64Array(maxNode + 1);
    const parts: WorkerParts = {
      appId: this.app.id,
      topology: this.topology,
      config: this.config,
      client: this.client,
      logger: this.logger,
      metrics: this.metrics,
      isRunning: () => this.#state === 'running',
    };
    this.#manager = new TaskManager({
      ...parts,
      transactions: workerTransactions(parts, opts.groupInstanceId, () => this.#consumer),
      openState: opts.openState,
      plainProducer: () =>
        (this.#plain ??= this.client.plainProducer((tps) => this.#inputRate.behind(this.lag, tps))),
      consumer: () => this.#consumer,
      opCounts: this.opCounts,
      lag: this.lag,
      inputRate: this.#inputRate,
      failOverOnFullDisk: (task, e) => this.#failOverOnFullDisk(task, e),
      taskFailed: (task, e) => this.#taskFailed(task, e),
      hasFailed: () => this.#fatal !== undefined, // also once stopping
    });
    this.#changelogs = new ChangelogWatch({
      ...parts,
      tasks: this.#manager,
      setPlan: (plan) => void (this.#plan = plan),
    });
  }

  /** This worker's member id in the group (known after its first assignment). */
  get memberId(): string | undefined {
    return this.#memberId;
  }

  /** Its KIP-345 group.instance.id (undefined: a dynamic member). */
  get groupInstanceId(): string | undefined {
    return this.#opts.groupInstanceId;
  }

  /** The HTTP address this worker advertises to the group. */
  get httpAddress(): string | undefined {
    return this.#opts.httpAddress?.();
  }

  /** Partition count per sub-topology, once the topics are prepared. */
  get plan(): ReadonlyMap<number, number> {
    return this.#plan;
  }

  /** Adds a section to /status: `fn` runs on every status request (keep it cheap and synchronous). */
  addStatusSection(name: string, fn: StatusSection): void {
    this.statusSections.set(name, fn);
  }

  get state(): WorkerStateName {
    return this.#state;
  }
  get tasks(): ReadonlyMap<string, Task> {
    return this.#manager.tasks;
  }

  /** Each task's share of the worker's cache bound (`state.cacheMaxBytes`) at the current assignment. */
  cacheShare(): number {
    return this.#manager.cacheShare();
  }

  /** Members of the group as the last assignment saw them (leader only knows all). */
  get members(): ReadonlyMap<string, MemberInfo> {
    return this.#members;
  }

  /** Ready: in the group, with every owned task restored and running. */
  readiness(): { ready: boolean; reason?: string } {
    const { sessionTimeoutMs } = this.config.kafka;
    const joiningForMs = Date.now() - this.#joinSince;
    const w = { state: this.#state, assignedOnce: this.#assignedOnce, joiningForMs, sessionTimeoutMs };
    return readinessOf({ ...w, tasks: this.#manager.tasks.values() });
  }

  liveness(): boolean {
    return this.#state !== 'failed';
  }
  async start(): Promise<void> {
    if (this.#state !== 'created')
      throw new SluiceError('SLUICE_JOB_INVALID', `worker already ${this.#state}`);
    this.#state = 'starting';
    const { processing, kafka } = this.config;
    this.logger.info({ guarantee: processing.guarantee, brokers: kafka.brokers }, 'worker starting');
    this.logger.debug(this.topology.describe());
    validateOverload(this.topology, this.config.overload);
    const wait = { logger: this.logger, stopping: this.#stopping }; // a registry not serving
    const schemas = await prepareSchemas(this.topology, this.config, { wait });
    const admin = await this.#retrying(
      'connect to Kafka',
      () => this.client.admin(),
      (e) => !isAuthError(e),
    );
    this.#plan = await this.#retrying(
      'prepare topics',
      () => prepareAndRecord(admin, this.client, this.topology, this.config, this.logger),
      (e) => !(e instanceof SluiceError),
    );
    const topics = this.topology.subtopologies.flatMap((s) => s.sourceTopics);
    this.#consumer = this.client.consumer({
      groupId: this.app.id,
      topics,
      readCommitted: true,
      concurrency: processing.concurrency,
      maxBytesPerPartition: processing.maxBytesPerPartition,
      layout: this.topology,
      memberInfo: () => ({ tasks: [...this.#manager.tasks.keys()], http: this.#opts.httpAddress?.() }),
      onMembers: (m) => void (this.#members = m),
      groupInstanceId: this.#opts.groupInstanceId,
      beforeRejoin: () => this.#manager.beforeRejoin(),
      rejoinFailed: () => this.#manager.rejoinFailed(),
    });
    this.#joinSince = Date.now();
    await this.#consumer.start({
      onAssignment: (a, member) => {
        if (member) this.#memberId = member.memberId;
        this.group.invalidate();
        this.#assignedOnce = true;
        this.#manager.onAssignment(a);
      },
      onBatch: (b) =>
        schemas.before(b.topic, b.records, () => this.#onBatch(b), {
          stopping: wait.stopping,
          waiting: () => this.#skipped(b.topic, b.partition, beforeBatch(b), b.highWatermark),
        }),
      onSkipped: (topic, partition, lastOffset, high) => this.#skipped(topic, partition, lastOffset, high),
      onFatal: (e) => this.#fail(e),
    });
    this.#timer = setInterval(() => this.#checkpointDue(), this.#pacer.tickMs);
    this.#timer.unref();
    this.#changelogs.start();
    this.#overload = new OverloadController({
      appId: this.app.id,
      groupId: this.app.id,
      config: this.config.overload,
      logger: this.logger,
      metrics: this.metrics,
      admin: () => this.client.admin(),
      tasks: () => [...this.#manager.tasks.values()].filter((t) => t.state === 'running'),
      subtopologies: this.topology.subtopologies,
      isInternal: (t) => this.topology.repartitionTopics.has(t),
      partitions: () => this.#plan,
      lagOf: (topic, partition) => this.lag.get(`${topic}:${partition}`),
    });
    this.#overload.start();
    this.addStatusSection('overload', () => this.#overload!.status());
    this.#purge = new RepartitionPurge({
      groupId: this.app.id,
      intervalMs: processing.repartitionPurgeIntervalMs,
      admin: () => this.client.admin(),
      topics: this.topology.repartitionTopics,
      tasks: () => this.#manager.tasks.values(),
      logger: this.logger,
      failed: () => this.metrics.errors.inc({ app: this.app.id, kind: 'repartition_purge' }),
    });
    this.#purge.start();
    this.#state = 'running';
    this.logger.info({ topics }, 'worker running');
  }

  readonly #stopping = () => this.#state === 'stopping' || this.#state === 'stopped';
  #retrying<T>(what: string, fn: () => Promise<T>, retriable?: (e: unknown) => boolean): Promise<T> {
    return retrying(this.logger, what, fn, { retriable, stopping: this.#stopping });
  }

  async #onBatch(b: BatchContext): Promise<void> {
    if (this.#state !== 'running' && this.#state !== 'starting') return;
    const sub = this.topology.subtopologyOf(b.topic);
    if (sub === undefined) return;
    const task = this.#manager.tasks.get(taskIdOf(sub, b.partition));
    if (!task) return;
    // Restoring: the batch is fetched again later. Never hold the consumer while stopping.
    if (task.state !== 'running') return this.#manager.awaitReady(task, b.heartbeat, this.#running);
    if (task.checkpointBacklogged) await this.#manager.awaitIdle(task, b.heartbeat, this.#running);
    if (task.async.backlogged) await this.#manager.awaitRoom(task, b.heartbeat, this.#running);
    if (b.isStale() || !this.#manager.owns(task) || task.state !== 'running') return;
    const sync = this.#syncs.of(task); // several inputs: in timestamp order across them
    try {
      const n = sync ? sync.add(b, Date.now()) : await this.#manager.processBatch(task, b, this.#running);
      if (n > 0) this.#inputRate.add(b.topic, b.partition, n);
    } catch (e) {
      return this.#taskFailed(task, e);
    }
    const last = b.records[b.records.length - 1];
    // From the fetch's end, not the last record's: a trailing commit marker is no backlog.
    if (last) this.#setLag(b.topic, b.partition, b.highWatermark, b.fetchedTo ?? last.offset);
    if (this.#pacer.due(task)) void this.#manager.checkpoint(task); // not awaited: see checkpointBacklogged
  }

  /** A batch not processed (markers only, or waiting on the registry): its position stays. */
  #skipped(topic: string, partition: number, lastOffset: string, high: string): void {
    this.#syncs.fetched(topic, partition, lastOffset, high);
    if (this.lag.has(`${topic}:${partition}`)) this.#setLag(topic, partition, high, lastOffset);
  }

  /** Lag = high watermark − position, the position being one past `lastOffset` (records or markers). */
  #setLag(topic: string, partition: number, high: string, lastOffset: string): void {
    const lag = Math.max(0, Number(BigInt(high) - BigInt(lastOffset) - 1n));
    this.lag.set(`${topic}:${partition}`, lag);
    this.metrics.lag.set({ app: this.app.id, topic, partition: String(partition) }, lag);
  }

  #checkpointDue(): void {
    this.#inputRate.tick();
    this.#pacer.tick();
    this.#manager.tick((t) => this.#syncs.drain(t, Date.now()), this.#pacer.due);
  }

  /** The `fail` policy fails the worker; a fault of Sluice or the machine resets the task. */
  #taskFailed(task: Task, e: unknown): void {
    if (e instanceof SluiceError && e.code === 'SLUICE_OPERATOR') this.#fail(e);
    else this.#manager.processingFailed(task, e);
  }

  /**
   * A full disk under the state folder is not something a task retry can fix: the worker fails (exit 1,
   * /healthz 503), leaves the group, and its tasks fail over to other workers, which restore them
   * from the changelogs. Nothing committed is lost (Kafka commits before the RocksDB batch).
   */
  #failOverOnFullDisk(task: Task, e: unknown): boolean {
    // The `fail` policy met at a checkpoint (an update flushed from the record cache) fails too.
    if (e instanceof SluiceError && e.code === 'SLUICE_OPERATOR') {
      this.#fail(e);
      return true;
    }
    if (!(e instanceof StateIoError && e.diskFull)) return false;
    this.metrics.errors.inc({ app: this.app.id, kind: 'state_disk_full' });
    this.logger.error(
      { err: e, task: task.id, dir: e.dir },
      'state folder is full: this worker stops so its tasks move to other workers; free space under state.dir',
    );
    this.#fail(e);
    return true;
  }

  #fail(e: Error): void {
    if (this.#state === 'failed' || this.#state === 'stopped') return;
    this.#fatal = e;
    this.logger.error({ err: e }, 'worker failed');
    this.#state = 'failed';
    this.#opts.onFatal?.(e);
  }
  get fatalError(): Error | undefined {
    return this.#fatal;
  }

  /**
   * Graceful stop: checkpoint every task, leave the group (a static member only with `leaveGroup`,
   * default: when the worker failed, or the `leaveGroupOnStop` option), release everything.
   */
  async stop(opts: { leaveGroup?: boolean } = {}): Promise<void> {
    if (this.#state === 'stopped' || this.#state === 'stopping') return;
    const failed = this.#state === 'failed';
    this.#state = 'stopping';
    this.logger.info('worker stopping');
    if (this.#timer) clearInterval(this.#timer);
    this.#changelogs.stop();
    this.group.close();
    this.#overload?.stop();
    this.#purge?.stop(); // not waited for: a round in flight ends with the client (its error is caught)
    await this.#manager.closeAll({ checkpoint: !failed });
    await this.#consumer
      // A failed worker leaves even as a static member, so that its tasks fail over (full disk).
      ?.stop({ leave: opts.leaveGroup ?? (failed || this.#opts.leaveGroupOnStop === true) })
      .catch((e) => this.logger.warn({ err: e }, 'leaving the group failed'));
    const plain = this.#plain;
    this.#plain = undefined;
    if (plain) await (await plain).close().catch(() => undefined);
    await this.client.close().catch(() => undefined);
    this.#state = 'stopped';
    this.logger.info('worker stopped');
  }

  /** For /status (see ops/status.ts). */
  status(): Record<string, unknown> {
    return buildStatus(this);
  }
}
