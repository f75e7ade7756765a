import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import type { App } from '../api/app.js';
import { bytes, type Serde, string } from '../api/serdes.js';
import { loadConfig } from '../config/load.js';
import type { SluiceConfig, SluiceConfigInput } from '../config/schema.js';
import { SluiceError, TaskMigratedError } from '../errors.js';
import type { PlainProducer, TopicRecords } from '../kafka/producer.js';
import { assignTasks, taskIdOf } from '../kafka/task-assigner.js';
import { createLogger, type Logger } from '../ops/logger.js';
import { createWorkerMetrics, type WorkerMetrics } from '../ops/metrics.js';
import { prepareSchemas, type SchemaPrefetch } from '../registry/prepare.js';
import { isRegistrySerde } from '../registry/serdes.js';
import { openTaskState } from '../runtime/restore.js';
import { Task } from '../runtime/task.js';
import { deadLetterTopic, externalTopics, type PartitionPlan, prepareTopics } from '../runtime/topics.js';
import type { Topology } from '../topology/build.js';
import { INFLIGHT_STATE } from '../topology/nodes.js';
import { MemoryStorage } from './memory-store.js';
import { type DeadLetter, deadLettersOf, TestInput, TestOutput } from './records.js';
import { SimulatedKafka } from './sim-kafka.js';
import { type StateView, stateView } from './state-view.js';

/** When the driver's tasks checkpoint (commit their outputs, state and input offsets). */
export type CommitMode = 'pipe' | 'interval' | 'manual';

export interface TestDriverOptions {
  /**
   * Partitions of the job's external topics (inputs and outputs): one count for all, or per
   * topic (default 1). Internal topics get theirs as a worker gives them (repartition topics and
   * changelogs: their sub-topology's count).
   */
  partitions?: number | Record<string, number>;
  /** Sluice configuration, as in code (`processing.errorPolicy`, `processing.guarantee`, …). */
  config?: SluiceConfigInput;
  /** Simulated workers sharing the tasks (default 1); each has its own state folder. */
  workers?: number;
  /**
   * `pipe` (default): every task checkpoints after each pipe, until nothing is left to do.
   * `interval`: a task checkpoints once `processing.commitIntervalMs` of the driver's wall clock
   * has passed since its last one (move the clock with `advanceWallClock`), or on `commit()`.
   * `manual`: only `commit()` checkpoints. Outputs (and repartitioned records) become visible when
   * their checkpoint commits, as under exactly-once.
   */
  commit?: CommitMode;
  /** The wall clock's start, ms since the epoch (default: `Date.now()` when the driver is made). */
  wallClock?: number;
  /**
   * Where task state lives: `memory` (default), the in-memory stand-in for the RocksDB folders
   * (same interface, same cache, timers and restore above it; microseconds to open), or
   * `rocksdb`, real RocksDB in a temporary folder (50–70 ms to open a task), deleted on close.
   */
  state?: 'memory' | 'rocksdb';
  /** A logger (default: silent). */
  logger?: Logger;
}

let memoryDrivers = 0;

/** A simulated worker: its state folder and whether it is up. */
interface SimWorker {
  index: number;
  config: Readonly<SluiceConfig>;
  up: boolean;
}

/** Guards against a job that keeps producing to itself forever. */
const MAX_ROUNDS = 10_000;

/**
 * Runs an App's topology without a broker, deterministically: Kafka is simulated in memory
 * (topics, partitions, transactions, committed offsets, changelogs), everything else is the code a
 * worker runs (`Task`, its record loop, operators, RocksDB state in a temporary folder, timers,
 * windows, joins, shedding, error policies, checkpoints and restore). Like Kafka Streams'
 * `TopologyTestDriver`, plus any number of partitions (the real partitioner and repartitions) and
 * deterministic faults: {@link crash}, {@link restart}, {@link rebalance}.
 *
 * @example
 * const driver = new TestDriver(app, { partitions: 4 });
 * await driver.input('clicks').pipe('u1', { page: '/' });
 * assert.deepEqual(driver.output('counts').readValues(), [1]);
 * await driver.close();
 */
export class TestDriver {
  readonly app: App;
  readonly topology: Topology;
  readonly kafka = new SimulatedKafka();
  readonly config: Readonly<SluiceConfig>;
  readonly metrics: WorkerMetrics;
  /** The Prometheus registry of the driver's metrics (`await driver.registry.metrics()`). */
  readonly registry = new Registry();
  readonly #root: string;
  readonly #storage: MemoryStorage | undefined;
  readonly #logger: Logger;
  readonly #mode: CommitMode;
  readonly #partitions: number | Record<string, number>;
  readonly #workers: SimWorker[] = [];
  /** Task id → its (live) task; absent while its worker is down. */
  readonly #tasks = new Map<string, Task>();
  /** Task id → index of the worker that owns it. */
  readonly #owner = new Map<string, number>();
  /** Consumer position per `topic:partition` (what the group consumer would fetch next). */
  readonly #positions = new Map<string, bigint>();
  /** Task id → the wall clock at its last checkpoint (`interval` mode). */
  readonly #lastCommit = new Map<string, number>();
  readonly #outputs = new Map<string, TestOutput<any, any>>();
  /** At-least-once sends on their way (a batch's outputs go as it ends: output-stream.ts). */
  readonly #sends = new Set<Promise<unknown>>();
  #sentSince = 0;
  #plan: PartitionPlan = new Map();
  #clock: number;
  #started: Promise<void> | undefined;
  #closed = false;
  /** Serializes the driver's operations: a test that forgets an await still runs in order. */
  #queue: Promise<unknown> = Promise.resolve();
  /** The error that stopped the job (`processing.errorPolicy: fail`), until `restart()`. */
  #failed: unknown;
  /** The Schema Registry serdes' hooks, from the start. */
  #schemas: SchemaPrefetch | undefined;
  /** The shed fraction set by {@link shed} (the overload controller's decision, made by the test). */
  #shedP = 0;
  /** Tasks closed because a newer owner fenced them (zombies), by id. */
  readonly fenced: string[] = [];

  constructor(app: App, opts: TestDriverOptions = {}) {
    this.app = app;
    this.topology = app.topology();
    this.#storage = opts.state === 'rocksdb' ? undefined : new MemoryStorage();
    // In memory, the folders are only names: nothing is written to disk.
    this.#root = this.#storage
      ? join(tmpdir(), `sluice-driver-memory-${process.pid}-${++memoryDrivers}`)
      : mkdtempSync(join(tmpdir(), 'sluice-driver-'));
    this.#logger = opts.logger ?? createLogger({ level: 'silent', format: 'json' });
    this.#mode = opts.commit ?? 'pipe';
    this.#partitions = opts.partitions ?? 1;
    this.#clock = opts.wallClock ?? Date.now();
    const user = opts.config ?? {};
    this.config = loadConfig({
      env: {},
      overrides: {
        ...user,
        kafka: { ...user.kafka, brokers: ['simulated:9092'] },
        state: { ...user.state, dir: join(this.#root, 'w0') },
      },
    });
    this.metrics = createWorkerMetrics(this.registry);
    const n = opts.workers ?? 1;
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`workers must be a positive integer, got ${n}`);
    for (let i = 0; i < n; i++) this.#addWorker();
  }

  #addWorker(): SimWorker {
    const index = this.#workers.length;
    const config = { ...this.config, state: { ...this.config.state, dir: join(this.#root, `w${index}`) } };
    const w = { index, config, up: true };
    this.#workers.push(w);
    return w;
  }

  /** The driver's wall clock, ms since the epoch. */
  get wallClock(): number {
    return this.#clock;
  }

  /** Task ids and the worker that owns each, e.g. `{ '0_0': 0, '1_0': 0 }`. */
  get assignment(): Record<string, number> {
    return Object.fromEntries([...this.#owner].sort(([a], [b]) => a.localeCompare(b)));
  }

  /** The running tasks (read-only use: their state, watermark, positions). */
  get tasks(): ReadonlyMap<string, Task> {
    return this.#tasks;
  }

  /** Runs `fn` after every operation queued before it. */
  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.#queue.then(fn);
    this.#queue = p.catch(() => undefined);
    return p;
  }

  /** Creates the topics and starts every task; the first pipe (or any operation) does it too. */
  start(): Promise<void> {
    this.#started ??= this.#start();
    return this.#started;
  }

  async #start(): Promise<void> {
    const { inputs, outputs } = externalTopics(this.topology);
    for (const t of [...inputs, ...outputs]) this.kafka.createTopic(t, this.#partitionsOf(t));
    const admin = await this.kafka.client(() => this.#clock).admin();
    this.#plan = await prepareTopics(admin, this.topology, {
      overflow: this.config.overload.mode === 'divert',
      replicationFactor: this.config.kafka.replicationFactor,
    });
    // Schema Registry serdes (`schemaRegistry.url`, e.g. `mock://test`): writer ids resolved, and
    // the inputs' writers bound, as a worker's start does.
    this.#schemas = await prepareSchemas(this.topology, this.config, { inputWriters: true });
    const all: string[] = [];
    for (const s of this.topology.subtopologies)
      for (let p = 0; p < (this.#plan.get(s.id) ?? 1); p++) all.push(taskIdOf(s.id, p));
    const plan = assignTasks(
      this.#workers.map((w) => ({ memberId: `w${w.index}`, info: { tasks: [] } })),
      all,
    );
    for (const [member, ids] of plan) for (const id of ids) this.#owner.set(id, Number(member.slice(1)));
    for (const id of this.#sortedIds()) await this.#startTask(id);
    await this.#drain(false);
  }

  #partitionsOf(topic: string): number {
    const p = this.#partitions;
    return typeof p === 'number' ? p : (p[topic] ?? 1);
  }

  #sortedIds(): string[] {
    return [...this.#owner.keys()].sort((a, b) => {
      const [sa, pa] = a.split('_').map(Number);
      const [sb, pb] = b.split('_').map(Number);
      return sa! - sb! || pa! - pb!;
    });
  }

  async #startTask(id: string): Promise<void> {
    const w = this.#workers[this.#owner.get(id)!]!;
    const [sub, partition] = id.split('_').map(Number) as [number, number];
    const client = this.kafka.client(() => this.#clock);
    const task = new Task(id, this.topology.subtopologies[sub]!, partition, {
      appId: this.app.id,
      groupId: this.app.id,
      config: w.config,
      client,
      logger: this.#logger.child({ worker: w.index }),
      metrics: this.metrics,
      plainProducer: async () => {
        const p = await client.plainProducer();
        const send = (r: TopicRecords) => {
          const sent = p.send(r).finally(() => this.#sends.delete(sent));
          this.#sends.add(sent);
          this.#sentSince++;
          return sent;
        };
        return { send, close: () => p.close() } as unknown as PlainProducer;
      },
      openState: (t) =>
        openTaskState(t, {
          client,
          metrics: this.metrics,
          logger: t.logger,
          config: w.config,
          appId: this.app.id,
          ...(this.#storage ? { storage: this.#storage } : {}),
        }),
      seek: (topic, p, offset) => this.#positions.set(`${topic}:${p}`, BigInt(offset)),
      deadLetterTopic: deadLetterTopic(this.app.id),
      now: () => this.#clock,
      // As the worker: the `fail` policy fails the job; a fault resets the task.
      asyncFailed: (t, e) => {
        if (e instanceof SluiceError && e.code === 'SLUICE_OPERATOR') this.#failed = e;
        else void t.reset(e).catch(() => undefined);
      },
    });
    task.commitOffsetsAtLeastOnce = async (offsets) => this.kafka.commitOffsets(this.app.id, offsets);
    await task.init();
    task.shedder.setFraction(this.#shedP);
    this.#tasks.set(id, task);
    this.#lastCommit.set(id, this.#clock);
  }

  /** Live tasks in a fixed order: sub-topology, then partition. */
  #live(): Task[] {
    const out: Task[] = [];
    for (const id of this.#sortedIds()) {
      const t = this.#tasks.get(id);
      if (t && t.state === 'running') out.push(t);
    }
    return out;
  }

  /** Fetches the schemas of the records {@link #deliver} is about to hand out, as a worker does per batch. */
  async #prefetchSchemas(): Promise<void> {
    const schemas = this.#schemas;
    if (!schemas) return;
    for (const task of this.#live())
      for (const topic of task.inputTopics) {
        const from = this.#positions.get(`${topic}:${task.partition}`) ?? 0n;
        const records = this.kafka.read(topic, task.partition, from);
        if (records.length === 0) continue;
        // A worker waits for a registry that is not serving; a test is told at once.
        let down: Error | undefined;
        const waiting = (e: Error) => {
          down = e;
        };
        await schemas.before(topic, records, async () => {}, { backoff: false, waiting });
        if (down) throw down;
      }
  }

  /** Hands every task the records it has not been given yet (one batch per input partition). */
  #deliver(): number {
    let n = 0;
    for (const task of this.#live()) {
      for (const topic of task.inputTopics) {
        const key = `${topic}:${task.partition}`;
        const from = this.#positions.get(key) ?? 0n;
        const records = this.kafka.read(topic, task.partition, from);
        if (records.length === 0) continue;
        this.#positions.set(key, BigInt(records[records.length - 1]!.offset) + 1n);
        try {
          n += task.process(topic, records, () => undefined);
        } catch (e) {
          // `processing.errorPolicy: fail` (or an operator's `onError: 'fail'`): the worker fails.
          if (e instanceof SluiceError && e.code === 'SLUICE_OPERATOR') this.#failed = e;
          throw e;
        }
      }
    }
    return n;
  }

  /** Checkpoints the tasks that have something to commit (all, or those due). */
  async #commit(force: boolean): Promise<number> {
    let n = 0;
    for (const task of this.#live()) {
      if (!task.hasPending) continue;
      const due =
        this.#clock - (this.#lastCommit.get(task.id) ?? 0) >= this.config.processing.commitIntervalMs;
      if (!force && !(this.#mode === 'pipe' || (this.#mode === 'interval' && due))) continue;
      try {
        await task.checkpoint();
        this.#lastCommit.set(task.id, this.#clock);
        n++;
      } catch (e) {
        // As the worker's task manager: fenced → closed as migrated; else back to the last checkpoint.
        if (e instanceof TaskMigratedError) {
          this.#logger.warn({ task: task.id }, 'task migrated');
          this.fenced.push(task.id);
          this.#tasks.delete(task.id);
          await task.close({ checkpoint: false });
        } else {
          this.#logger.warn({ err: e, task: task.id }, 'checkpoint failed; the task resets');
          await task.reset(e);
          this.#lastCommit.set(task.id, this.#clock);
          n++;
        }
      }
    }
    return n;
  }

  /** Delivers and checkpoints until nothing moves: repartitioned records reach their readers. */
  async #drain(force: boolean): Promise<void> {
    for (let round = 0; ; round++) {
      if (round > MAX_ROUNDS) throw new Error(`the job did not settle after ${MAX_ROUNDS} rounds (a loop?)`);
      await this.#prefetchSchemas();
      const delivered = this.#deliver();
      // Async stages (mapAsync, ...) run their records to the end before the checkpoint.
      for (const t of this.#live()) await t.async.drained();
      const committed = await this.#commit(force);
      if (delivered === 0 && committed === 0 && !(await this.#sent())) return;
    }
  }

  /**
   * Waits until no at-least-once send is on its way (one answered may start the next: the outputs
   * that collected meanwhile), so that a test sees every output sent; true if any was sent.
   */
  async #sent(): Promise<boolean> {
    for (;;) {
      await Promise.allSettled([...this.#sends]);
      // What an answered send starts runs in its microtasks: they have all run by the next turn.
      if (this.#sentSince > 0) await new Promise((r) => setImmediate(r));
      if (this.#sends.size === 0) break;
    }
    const any = this.#sentSince > 0;
    this.#sentSince = 0;
    return any;
  }

  #check(): void {
    if (this.#closed) throw new Error('the test driver is closed');
    if (this.#failed !== undefined)
      throw new Error(
        'the job failed (errorPolicy fail); call driver.restart() to go on from the last checkpoint',
        {
          cause: this.#failed,
        },
      );
  }

  /** Runs an operation once the driver has started and every earlier one ended, then settles. */
  #run(fn: () => void | Promise<void>, force = false): Promise<void> {
    return this.#serial(async () => {
      await this.start();
      this.#check();
      await fn();
      await this.#drain(force);
    });
  }

  /** The input side of a topic; `pipe` serializes with the source's serdes unless given. */
  input<K = any, V = any>(topic: string, serdes: { key?: Serde<K>; value?: Serde<V> } = {}): TestInput<K, V> {
    const source = this.topology.subtopologies.flatMap((s) => [...s.sources]).find(([t]) => t === topic)?.[1];
    const spec = source?.spec.kind === 'source' ? source.spec : undefined;
    const key = serdes.key ?? (spec?.key as Serde<K> | undefined) ?? (string() as unknown as Serde<K>);
    const value = serdes.value ?? (spec?.value as Serde<V> | undefined) ?? (bytes() as unknown as Serde<V>);
    // A source's registry serde writes through a copy bound to the topic's subject at start.
    const writer = <T>(s: Serde<T>, side: 'key' | 'value'): Serde<T> =>
      isRegistrySerde(s) && s === spec?.[side]
        ? {
            name: s.name,
            serialize: (v) => {
              const w = this.#schemas?.inputWriters.get(topic)?.[side];
              if (!w)
                throw new Error(
                  `${s.name}() of ${topic} was given no schema, so pipe cannot write: use pipeRaw`,
                );
              return w.serialize(v);
            },
            deserialize: (b) => s.deserialize(b),
          }
        : s;
    const registry = isRegistrySerde(key) || isRegistrySerde(value);
    return new TestInput<K, V>(
      topic,
      { key: writer(key, 'key'), value: writer(value, 'value') },
      {
        ...(registry ? { ready: () => this.start() } : {}),
        write: (r, partition) => {
          if (!this.kafka.hasTopic(topic)) this.kafka.createTopic(topic, this.#partitionsOf(topic));
          this.kafka.append(topic, r, partition);
        },
        run: () => this.#run(() => undefined),
        now: () => this.#clock,
      },
    );
  }

  /** The output side of a topic (committed records); deserialized with its sink's serdes unless given. */
  output<K = any, V = any>(
    topic: string,
    serdes: { key?: Serde<K>; value?: Serde<V> } = {},
  ): TestOutput<K, V> {
    const cached = this.#outputs.get(topic);
    if (cached && serdes.key === undefined && serdes.value === undefined) return cached;
    const sink = this.topology.subtopologies
      .flatMap((s) => s.nodes)
      .find((n) => n.spec.kind === 'sink' && n.spec.topic === topic)?.spec;
    const spec = sink?.kind === 'sink' ? sink : undefined;
    const key = serdes.key ?? (spec?.key as Serde<K> | undefined) ?? (string() as unknown as Serde<K>);
    const value = serdes.value ?? (spec?.value as Serde<V> | undefined) ?? (bytes() as unknown as Serde<V>);
    // Not created here: before the start that would give an internal topic the wrong partitions.
    const out = new TestOutput<K, V>(topic, this.kafka, { key, value });
    if (serdes.key === undefined && serdes.value === undefined) this.#outputs.set(topic, out);
    return out;
  }

  /** The committed records of the dead-letter topic `<appId>-dlq`. */
  deadLetters(): DeadLetter[] {
    return deadLettersOf(this.kafka, deadLetterTopic(this.app.id));
  }

  /**
   * A store of the job by its name (`<operator>-<state>`, as `sluice topology` lists them), or by
   * its operator's name when that operator has one store.
   */
  state<K = any, V = any>(store: string): StateView<K, V> {
    const stores = this.topology.stores.filter(
      (s) => s.stateName !== '__timers' && s.stateName !== INFLIGHT_STATE,
    );
    const spec =
      stores.find((s) => s.name === store) ??
      (() => {
        const byOp = stores.filter((s) => s.name.startsWith(`${store}-`));
        return byOp.length === 1 ? byOp[0] : undefined;
      })();
    if (!spec)
      throw new Error(
        `no store ${store}; the job's stores: ${stores.map((s) => s.name).join(', ') || 'none'}`,
      );
    const node = this.topology.subtopologies[spec.subtopology]!.nodes.find(
      (n) => n.spec.kind === 'process' && n.spec.stores.some((s) => s.name === spec.name),
    )!;
    return stateView<K, V>(spec.name, node.keySerde as Serde<K>, () => {
      if (!this.#started)
        throw new Error('the driver has not started: pipe a record or await driver.start()');
      return [...this.#tasks.values()].filter((t) => t.sub.id === spec.subtopology);
    });
  }

  /**
   * Moves the wall clock on by `ms`: processing-time timers that fall due fire (and, in
   * `interval` mode, tasks whose commit interval passed checkpoint). Event time moves only with
   * the records' timestamps.
   */
  advanceWallClock(ms: number): Promise<void> {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`advanceWallClock takes ms ≥ 0, got ${ms}`);
    return this.#run(() => {
      this.#clock += ms;
      for (const t of this.#live()) t.tick();
    });
  }

  /** Checkpoints every task now (in any commit mode), until nothing is left to do. */
  commit(): Promise<void> {
    return this.#run(() => undefined, true);
  }

  /**
   * Kills workers (all by default, or the one given) as `kill -9` would: each task closes without
   * a checkpoint, so what it did since its last one is gone (its state writes, its outputs, its
   * input position), and its RocksDB folder stays as RocksDB last took it: at that checkpoint, or
   * at an earlier local checkpoint whose later committed writes the changelogs replay
   * (`state.localCheckpointRecords`; `wipeState` deletes the folder, so the restart restores from
   * the changelog alone). Input piped meanwhile waits.
   */
  crash(opts: { worker?: number; wipeState?: boolean } = {}): Promise<void> {
    return this.#serial(async () => {
      await this.start();
      if (this.#closed) throw new Error('the test driver is closed');
      const which = opts.worker === undefined ? this.#workers : [this.#workers[opts.worker]!];
      if (which.some((w) => w === undefined)) throw new RangeError(`no worker ${opts.worker}`);
      for (const w of which) {
        for (const [id, owner] of this.#owner) {
          if (owner !== w.index) continue;
          const t = this.#tasks.get(id);
          this.#tasks.delete(id);
          await t?.close({ checkpoint: false });
          // The group consumer goes with the worker: the next owner starts at the committed offsets.
          for (const topic of this.topology.subtopologies[Number(id.split('_')[0])]!.sourceTopics)
            this.#positions.delete(`${topic}:${id.split('_')[1]}`);
        }
        w.up = false;
        if (opts.wipeState) {
          this.#storage?.wipe(w.config.state.dir);
          rmSync(w.config.state.dir, { recursive: true, force: true });
        }
      }
    });
  }

  /**
   * Starts the crashed workers again (or the one given): their tasks restore from their folders
   * and the changelogs, read the committed offsets, and process what was not committed. Also the
   * way on after a job failed (`errorPolicy: fail`).
   */
  restart(opts: { worker?: number } = {}): Promise<void> {
    return this.#serial(async () => {
      await this.start();
      if (this.#closed) throw new Error('the test driver is closed');
      if (this.#failed !== undefined) {
        this.#failed = undefined;
        // A failed worker exits: nothing since the last checkpoint survives.
        for (const [id, t] of [...this.#tasks]) {
          this.#tasks.delete(id);
          await t.close({ checkpoint: false });
        }
        for (const w of this.#workers) w.up = false;
      }
      for (const w of this.#workers) {
        if (opts.worker !== undefined && w.index !== opts.worker) continue;
        w.up = true;
      }
      for (const id of this.#sortedIds())
        if (!this.#tasks.has(id) && this.#workers[this.#owner.get(id)!]!.up) await this.#startTask(id);
      await this.#drain(false);
    });
  }

  /**
   * A rebalance. Either `workers`: the group now has that many members and the real assigner
   * (sticky, task-aware) spreads the tasks; or `move`: task id → worker index. A moved task's old
   * owner checkpoints and closes it first, as a worker does before it rejoins (`revoke: 'commit'`,
   * default); with `revoke: 'zombie'` the old owner keeps running it, unaware, until its next
   * checkpoint is fenced by the new owner (its uncommitted work is then lost and redone by the new
   * owner; the task id is listed in `driver.fenced`). The new owner restores the task in its own
   * folder (from the changelog, or only its tail when it held the task before).
   */
  rebalance(opts: {
    workers?: number;
    move?: Record<string, number>;
    revoke?: 'commit' | 'zombie';
  }): Promise<void> {
    return this.#run(async () => {
      if (opts.workers !== undefined) {
        if (!Number.isInteger(opts.workers) || opts.workers < 1)
          throw new RangeError(`workers must be a positive integer, got ${opts.workers}`);
        while (this.#workers.length < opts.workers) this.#addWorker();
      }
      const members = (opts.workers ?? this.#workers.length) as number;
      const next = new Map(this.#owner);
      if (opts.move) {
        for (const [id, w] of Object.entries(opts.move)) {
          if (!next.has(id)) throw new RangeError(`no task ${id}; tasks: ${this.#sortedIds().join(', ')}`);
          if (!this.#workers[w]) throw new RangeError(`no worker ${w}`);
          next.set(id, w);
        }
      } else {
        const plan = assignTasks(
          Array.from({ length: members }, (_, i) => ({
            memberId: `w${i}`,
            info: { tasks: [...this.#owner].filter(([, o]) => o === i).map(([id]) => id) },
          })),
          this.#sortedIds(),
        );
        for (const [member, ids] of plan) for (const id of ids) next.set(id, Number(member.slice(1)));
      }
      const moved = this.#sortedIds().filter((id) => next.get(id) !== this.#owner.get(id));
      const zombies: Task[] = [];
      for (const id of moved) {
        const t = this.#tasks.get(id);
        this.#tasks.delete(id);
        if (!t) continue;
        if (opts.revoke === 'zombie') zombies.push(t);
        else await t.close({ checkpoint: true });
      }
      for (const id of moved) {
        this.#owner.set(id, next.get(id)!);
        if (this.#workers[next.get(id)!]!.up) await this.#startTask(id);
      }
      // The zombies wake up and try to commit: the new owners' fences refuse them.
      for (const z of zombies) {
        try {
          await z.checkpoint();
        } catch (e) {
          if (!(e instanceof TaskMigratedError)) throw e;
          this.fenced.push(z.id);
        }
        await z.close({ checkpoint: false });
      }
    });
  }

  /**
   * Sets the fraction of records every task sheds from now on, as the worker's overload
   * controller would (it does not run here: its inputs are rates and busy time, which a test does
   * not have). Needs `overload.mode` `shed` or `divert` (backpressure never sheds). The drops
   * themselves are the worker's: at the source or at `.shed()` points, random or by priority,
   * diverted to `<appId>-overflow` in divert mode. 0 and 1 are deterministic; in between, the
   * random drops use `Math.random` as a worker does, so assert on totals (kept + shed = input).
   */
  shed(p: number): Promise<void> {
    if (!(p >= 0 && p <= 1)) throw new RangeError(`shed takes a fraction in [0, 1], got ${p}`);
    return this.#serial(async () => {
      this.#shedP = p;
      for (const t of this.#tasks.values()) t.shedder.setFraction(p);
    });
  }

  /**
   * Makes the next checkpoint's transaction fail (nothing of it is written): the task resets to
   * its last checkpoint, as a worker's does, and processes the records since then again.
   */
  failNextCommit(error: Error = new Error('simulated commit failure')): void {
    this.kafka.failNextCommit = error;
  }

  /** Closes every task (without a checkpoint: the test is over) and deletes the state folders. */
  close(): Promise<void> {
    return this.#serial(async () => {
      if (this.#closed) return;
      this.#closed = true;
      try {
        await this.#started?.catch(() => undefined);
        for (const t of this.#tasks.values()) await t.close({ checkpoint: false }).catch(() => undefined);
        this.#tasks.clear();
      } finally {
        rmSync(this.#root, { recursive: true, force: true });
      }
    });
  }
}
