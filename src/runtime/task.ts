import type { SluiceConfig } from '../config/schema.js';
import { OperatorError, SerdeError, SluiceError, safeString } from '../errors.js';
import type { KafkaClient } from '../kafka/client.js';
import type { PlainProducer, TransactionalProducer, WrittenOffsets } from '../kafka/producer.js';
import type { InRecord, OutRecord, TopicPartitionOffset } from '../kafka/types.js';
import type { Logger } from '../ops/logger.js';
import type { WorkerMetrics } from '../ops/metrics.js';
import { OperatorCostSampler } from '../overload/operator-cost.js';
import { createShedOp } from '../overload/shed-op.js';
import { TaskShedder } from '../overload/shedder.js';
import type { SubTopology } from '../topology/build.js';
import { checkpointSize } from './checkpoint-size.js';
import { Collector } from './collector.js';
import { deadLetterRecord, type ErrorPolicy } from './dead-letter.js';
import { compileOperators, type Op } from './operators.js';
import { MutableRecordContext } from './record-context.js';
import type { TaskState } from './task-state.js';
import { overflowTopic } from './topics.js';

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
}

export class Task {
  readonly id: string;
  readonly partition: number;
  readonly sub: SubTopology;
  readonly logger: Logger;
  #state: TaskStateName = 'created';
  readonly #deps: TaskDeps;
  readonly #eos: boolean;
  readonly #collector = new Collector();
  readonly #rc = new MutableRecordContext();
  #ops = new Map<string, Op>();
  #producer: TransactionalProducer | undefined;
  #store: TaskState | undefined;
  /** Next offset to process per input topic; undefined = take what comes (no committed offset). */
  readonly #next = new Map<string, bigint | undefined>();
  /** Offsets processed since the last checkpoint, to commit at the next one. */
  readonly #toCommit = new Map<string, bigint>();
  #lastCheckpoint = Date.now();
  #busy: Promise<void> | undefined;
  #ready: Promise<void> | undefined;
  #dlqSeen = new Set<string>();
  /** Records processed since the last checkpoint (including dead-lettered ones). */
  #dirtyRecords = 0;
  readonly #policy: ErrorPolicy;
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
    this.#policy = deps.config.processing.errorPolicy;
    this.logger = deps.logger.child({ task: id });
    this.#rc.partition = partition;
    this.shedder = new TaskShedder({ ...deps.config.overload, overflowTopic: overflowTopic(deps.appId) });
  }

  /** Next offset to process on an input topic (for lag), once known. */
  positionOf(topic: string): bigint | undefined {
    return this.#next.get(topic);
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
    for (const t of this.sub.sourceTopics) out[t] = this.#next.get(t)?.toString() ?? null;
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

  /** Starts (or restarts) the task: fence, restore state, find the input offsets. */
  init(): Promise<void> {
    this.#ready = this.#init();
    return this.#ready;
  }

  /** Resolves when the task can process (or rejects if it could not be restored). */
  whenReady(): Promise<void> {
    return this.#ready ?? this.init();
  }

  async #init(): Promise<void> {
    this.#to('restoring');
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
    this.#maxTs.clear();
    this.#watermark = undefined;
    this.#rc.watermark = undefined;
    this.#wmTopics = this.#watermarkTopics;
    for (const topic of this.sub.sourceTopics) {
      const c = committed.find((o) => o.topic === topic && o.partition === this.partition);
      const t = eventTimeOf(c?.metadata);
      if (t !== undefined) this.#maxTs.set(topic, t);
      let off = c && BigInt(c.offset) >= 0n ? BigInt(c.offset) : undefined;
      if (off === undefined) {
        // No commit yet: start at the log's start, explicitly, so that a reset goes back there too.
        const low = (await admin.offsets(topic)).find((p) => p.partition === this.partition)?.low;
        off = BigInt(low ?? '0');
      }
      this.#next.set(topic, off);
      this.#deps.seek(topic, this.partition, off.toString());
    }
    this.#collector.clear();
    this.#toCommit.clear();
    this.#dirtyRecords = 0;
    const app = this.#deps.appId;
    this.#ops = compileOperators(
      this.sub.sources,
      this.#rc,
      this.#collector,
      (node, down, late) => {
        if (!this.#store)
          throw new SluiceError(
            'SLUICE_TOPOLOGY_INVALID',
            `operator ${node.name} needs state but the task has none`,
          );
        return this.#store.processOp(node, down, this.#rc, this.#collector, late);
      },
      { late: (operator, action) => this.#deps.metrics.lateRecords.inc({ app, operator, action }) },
      this.#deps.opCounts,
      (node, down) =>
        createShedOp(node, down, { shedder: this.shedder, rc: this.#rc, emitter: this.#collector }),
      this.costs,
    );
    this.#lastCheckpoint = Date.now();
    if (this.isClosed) return this.#release();
    this.#to('running');
    this.#moveWatermark();
    this.logger.info(
      {
        ms: Date.now() - started,
        offsets: Object.fromEntries([...this.#next].map(([t, o]) => [t, o?.toString() ?? 'earliest'])),
      },
      'task running',
    );
  }

  /** Waits for a checkpoint in flight. */
  async idle(): Promise<void> {
    // A failed checkpoint is handled by whoever started it (the worker resets the task); a batch
    // that only waits for it must not fail too (kafkajs would crash the consumer on a
    // non-retriable error, such as a coordinator lost in a broker outage).
    while (this.#busy) await this.#busy.catch(() => undefined);
  }

  get hasPending(): boolean {
    return this.#dirtyRecords > 0 || this.#collector.count > 0 || (this.#store?.dirty ?? false);
  }

  get checkpointDue(): boolean {
    return Date.now() - this.#lastCheckpoint >= this.#deps.config.processing.commitIntervalMs;
  }

  /**
   * Processes a batch of one input partition, synchronously. Records below the task's position
   * (a re-fetch after a rebalance or a seek) are skipped: the task, not the consumer, knows
   * what it has applied to its state.
   */
  process(topic: string, records: InRecord[], resolveOffset: (o: string) => void): number {
    if (this.#state !== 'running') return 0;
    const op = this.#ops.get(topic);
    const source = this.sub.sources.get(topic);
    if (!op || !source || source.spec.kind !== 'source') return 0;
    const ks = source.spec.key;
    const vs = source.spec.value;
    const tsOf = source.spec.timestamp;
    const rc = this.#rc;
    const collector = this.#collector;
    const known = this.#next.get(topic);
    // Offsets rise within a batch: skip the prefix this task has applied already (a re-fetch
    // after a rebalance or a seek), then process the rest without per-record offset arithmetic.
    let first = 0;
    if (known !== undefined) while (first < records.length && BigInt(records[first]!.offset) < known) first++;
    const n = records.length - first;
    // Event time is tracked per record: a record first moves its partition's time (and so maybe
    // the watermark, firing the event-time timers it passes, e.g. closing windows), then is
    // processed against that watermark. Decisions (late or not, which windows are open) thus
    // depend only on the record order within the partition, never on how records were batched.
    const inWatermark = !source.spec.table;
    let maxTs = this.#maxTs.get(topic) ?? Number.NEGATIVE_INFINITY;
    rc.topic = topic;
    rc.watermark = this.#watermark;
    const started = performance.now();
    const shedder = this.shedder;
    const shedAtSource = shedder.atSource && shedder.p > 0;
    const shedBefore = shedder.shed;
    let shed = 0;
    for (let i = first; i < records.length; i++) {
      const r = records[i]!;
      rc.offset = r.offset;
      rc.timestamp = Number(r.timestamp);
      if (shedAtSource && shedder.dropRandom()) {
        // Shed before deserializing: the cheapest place. Its offset is committed like any other.
        shed++;
        if (shedder.divert)
          collector.emit(
            shedder.overflowTopic,
            r.key,
            r.value,
            rc.timestamp,
            shedder.overflowHeaders(r, topic, this.partition),
          );
        continue;
      }
      rc.headers = r.headers as Record<string, unknown> | undefined;
      const mark = collector.count;
      let key: unknown;
      let value: unknown;
      try {
        key = r.key === null ? null : ks.deserialize(r.key);
        value = vs.deserialize(r.value);
        if (tsOf !== undefined) {
          rc.key = key;
          const t = tsOf === 'processing' ? Date.now() : tsOf(value, rc);
          if (typeof t !== 'number' || !Number.isFinite(t))
            throw new SerdeError(`timestamp extractor returned ${String(t)}, not a finite number`);
          rc.timestamp = t;
        }
      } catch (e) {
        this.#deadLetter(topic, r, e instanceof SluiceError ? e : new SerdeError(safeString(e), e));
        continue;
      }
      if (inWatermark && rc.timestamp > maxTs) {
        maxTs = rc.timestamp;
        this.#maxTs.set(topic, maxTs);
        this.#moveWatermark();
      }
      try {
        rc.key = key;
        this.costs.next();
        op.push(key, value);
      } catch (e) {
        collector.truncate(mark);
        this.#deadLetter(topic, r, e);
      }
    }
    if (records.length > 0) resolveOffset(records[records.length - 1]!.offset);
    if (n > 0) {
      const next = BigInt(records[records.length - 1]!.offset) + 1n;
      this.#next.set(topic, next);
      this.#toCommit.set(topic, next);
    }
    this.#dirtyRecords += n;
    if (n > 0) {
      const busyMs = performance.now() - started;
      shedder.processed += n - shed;
      shedder.busyMs += busyMs;
      this.#deps.metrics.recordsIn.inc({ app: this.#deps.appId, topic }, n);
      // Counted with the batch (source and .shed() drops alike), so in step with records_in.
      if (shedder.shed > shedBefore)
        this.#deps.metrics.recordsShed.inc(
          { app: this.#deps.appId, reason: shedder.reason },
          shedder.shed - shedBefore,
        );
      this.#deps.metrics.processingTime.observe({ app: this.#deps.appId }, busyMs / 1000);
    }
    return n;
  }

  /** Event time per input topic (max seen); the watermark is the minimum, less the allowed disorder. */
  readonly #maxTs = new Map<string, number>();
  #watermark: number | undefined;
  get watermark(): number | undefined {
    return this.#watermark;
  }

  /** Stream inputs (not tables) make the watermark: a table's updates carry no event-time promise. */
  get #watermarkTopics(): string[] {
    return this.sub.sourceTopics.filter((t) => {
      const s = this.sub.sources.get(t)?.spec;
      return !(s?.kind === 'source' && s.table);
    });
  }

  /** Recomputes the watermark from the partitions' times; fires the event-time timers it passes. */
  #moveWatermark(): void {
    if (this.#wmTopics.length === 0) return;
    let min = Number.POSITIVE_INFINITY;
    for (const t of this.#wmTopics) {
      const v = this.#maxTs.get(t);
      if (v === undefined) return; // a partition not heard from yet holds the watermark back
      if (v < min) min = v;
    }
    const w = min - this.#deps.config.processing.maxOutOfOrdernessMs;
    if (this.#watermark !== undefined && w <= this.#watermark) return;
    this.#watermark = w;
    this.#rc.watermark = w;
    if (this.#store) {
      const saved = this.#rc.timestamp;
      try {
        this.#store.advanceTime(w, undefined);
      } catch (e) {
        this.#deps.metrics.errors.inc({ app: this.#deps.appId, kind: 'timer' });
        this.logger.error({ err: e }, 'onTimer threw; the timer is dropped');
      } finally {
        this.#rc.timestamp = saved;
      }
    }
  }

  #wmTopics: string[] = [];

  #advanceTime(): void {
    try {
      this.#store?.advanceTime(undefined, Date.now());
    } catch (e) {
      this.#deps.metrics.errors.inc({ app: this.#deps.appId, kind: 'timer' });
      this.logger.error({ err: e }, 'onTimer threw; the timer is dropped');
    }
  }

  /** Periodic work without input: processing-time timers. */
  tick(): void {
    if (this.#state === 'running' && !this.#busy) this.#advanceTime();
  }

  #deadLetter(topic: string, r: InRecord, err: unknown): void {
    // An operator's own policy (`onError`) wins over the app's; the headers name the user's error.
    const op = err instanceof OperatorError ? err : undefined;
    const policy = op?.policy ?? this.#policy;
    const cause = op ? op.cause : err;
    const kind = op || !(err instanceof SerdeError) ? 'operator' : 'deserialize';
    const e = cause instanceof Error ? cause : new Error(safeString(cause));
    if (policy === 'fail') {
      throw new SluiceError(
        'SLUICE_OPERATOR',
        `record ${topic}/${this.partition}@${r.offset} failed (${kind}${op ? ` in operator ${op.operator}` : ''}): ${e.message}`,
        { cause: e },
      );
    }
    const sig = `${kind}:${e.name}:${e.message.slice(0, 60)}`;
    if (!this.#dlqSeen.has(sig)) {
      this.#dlqSeen.add(sig);
      if (this.#dlqSeen.size > 1000) this.#dlqSeen.clear();
      this.logger.warn(
        { err: e, topic, partition: this.partition, offset: r.offset, policy, operator: op?.operator },
        `bad record (${kind}); logged once per kind`,
      );
    }
    this.#deps.metrics.recordsDeadLettered.inc({ app: this.#deps.appId, reason: kind });
    if (policy === 'dlq') {
      const d = deadLetterRecord(r, e, { topic, partition: this.partition, kind, operator: op?.operator });
      this.#collector.emit(this.#deps.deadLetterTopic, d.key, d.value, Number(r.timestamp), d.headers);
    }
  }

  /**
   * Commits what the task did since the last checkpoint: outputs, changelog records and input
   * offsets in one transaction (exactly-once) or in that order (at-least-once); then, and only
   * then, the local RocksDB batch.
   */
  checkpoint(): Promise<void> {
    if (this.#busy) return this.#busy;
    if (this.#state !== 'running' || !this.hasPending) {
      this.#lastCheckpoint = Date.now();
      return Promise.resolve();
    }
    const p = this.#checkpoint().finally(() => {
      this.#busy = undefined;
    });
    this.#busy = p;
    return p;
  }

  async #checkpoint(): Promise<void> {
    const started = performance.now();
    const app = this.#deps.appId;
    const committedNext = new Map(this.#toCommit);
    const dirtyRecords = this.#dirtyRecords;
    const records = this.#collector.drain();
    const outputCount = [...records.values()].reduce((a, l) => a + l.length, 0);
    const changelog = new Map<string, OutRecord[]>();
    this.#store?.writeChangelog(changelog, this.partition);
    const all = new Map(records);
    for (const [t, l] of changelog) all.set(t, l);
    // The partition's event time goes with its offset (as Kafka Streams does), so that a task
    // restarted anywhere resumes with the watermark it had: late is late, before and after a crash.
    const offsets: TopicPartitionOffset[] = [...this.#toCommit].map(([topic, o]) => {
      const t = this.#maxTs.get(topic);
      return {
        topic,
        partition: this.partition,
        offset: o.toString(),
        metadata: t === undefined ? null : JSON.stringify({ t }),
      };
    });
    let written: WrittenOffsets;
    if (this.#eos) {
      written = await this.#producer!.commitTransaction(all, { groupId: this.#deps.groupId, offsets });
      this.#deps.metrics.txCommits.inc({ app });
    } else {
      const producer = await this.#deps.plainProducer();
      written = await producer.send(all);
      await this.#commitOffsetsAtLeastOnce(offsets);
    }
    await this.#store?.commitLocal(
      written,
      Object.fromEntries(offsets.map((o) => [`${o.topic}:${o.partition}`, o.offset])),
    );
    // Another input's batch may have been processed while this commit was in flight (kafkajs
    // runs partitions concurrently, and a task reads one partition of each of its topics): its
    // offsets and records belong to the next checkpoint, so forget only what this one committed.
    for (const [topic, o] of committedNext) if (this.#toCommit.get(topic) === o) this.#toCommit.delete(topic);
    this.#dirtyRecords -= dirtyRecords;
    this.#lastCheckpoint = Date.now();
    const now = Date.now();
    for (const [topic, l] of records) {
      if (topic === this.#deps.deadLetterTopic) continue;
      if (topic === this.shedder.overflowTopic) {
        this.#deps.metrics.recordsOut.inc({ app, topic }, l.length);
        continue;
      }
      this.#deps.metrics.recordsOut.inc({ app, topic }, l.length);
      for (let i = 0; i < l.length; i++)
        this.#deps.metrics.latency.observe({ app, topic }, Math.max(0, now - Number(l[i]!.timestamp)) / 1000);
    }
    for (const [topic, l] of changelog)
      this.#deps.metrics.changelogRecords.inc({ app, store: topic }, l.length);
    this.#deps.metrics.checkpoints.inc({ app });
    const size = checkpointSize(all.values());
    this.#deps.metrics.checkpointRecords.observe({ app }, size.records);
    this.#deps.metrics.checkpointBytes.observe({ app }, size.bytes);
    this.#store?.flushCacheMetrics();
    this.#deps.metrics.checkpointDuration.observe({ app }, (performance.now() - started) / 1000);
    this.logger.trace({ outputs: outputCount, offsets }, 'checkpoint');
  }

  /** Commits offsets through the group; filled in by the worker (it owns the consumer). */
  commitOffsetsAtLeastOnce: (offsets: TopicPartitionOffset[]) => Promise<void> = async () => undefined;
  async #commitOffsetsAtLeastOnce(offsets: TopicPartitionOffset[]): Promise<void> {
    try {
      await this.commitOffsetsAtLeastOnce(offsets);
    } catch (e) {
      // The outputs are written; a lost offset commit only means the records are read again.
      this.logger.warn({ err: e }, 'offset commit failed (at-least-once: records will be re-read)');
    }
  }

  /**
   * Throws away everything since the last checkpoint and starts over from it: a new producer
   * (fencing the old one), state back to RocksDB's view, input from the committed offsets.
   */
  reset(reason: unknown): Promise<void> {
    // Failures come from several places at once (checkpoint, init retry): one reset at a time.
    this.#resetting ??= this.#reset(reason).finally(() => {
      this.#resetting = undefined;
    });
    return this.#resetting;
  }

  #resetting: Promise<void> | undefined;

  async #reset(reason: unknown): Promise<void> {
    if (this.#state === 'closed') return;
    await this.#ready?.catch(() => undefined);
    this.logger.warn({ err: reason }, 'task resets to its last checkpoint');
    this.#collector.clear();
    this.#toCommit.clear();
    this.#dirtyRecords = 0;
    const producer = this.#producer;
    this.#producer = undefined;
    await producer?.close();
    const store = this.#store;
    this.#store = undefined;
    await store?.close();
    if (this.isClosed) return;
    this.#state = 'created';
    await this.init();
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
    this.#state = 'closed';
    this.#collector.clear();
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

/** The event time a task committed with its offset (`{"t": ms}`), if any. */
function eventTimeOf(metadata: string | null | undefined): number | undefined {
  if (!metadata) return undefined;
  try {
    const t = (JSON.parse(metadata) as { t?: unknown }).t;
    return typeof t === 'number' && Number.isFinite(t) ? t : undefined;
  } catch {
    return undefined;
  }
}
