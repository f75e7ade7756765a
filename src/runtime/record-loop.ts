import { isSluiceFault, OperatorError, SerdeError, SluiceError, safeString } from '../errors.js';
import type { InRecord } from '../kafka/types.js';
import type { WorkerMetrics } from '../ops/metrics.js';
import type { OperatorCostSampler } from '../overload/operator-cost.js';
import type { TaskShedder } from '../overload/shedder.js';
import type { SubTopology } from '../topology/build.js';
import type { InFlight } from './async-stage.js';
import { type Collector, emitsWithin } from './collector.js';
import {
  applyAsyncErrorPolicy,
  applyCacheFlushErrorPolicy,
  applyErrorPolicy,
  applyTimerErrorPolicy,
  type DeadLetterContext,
} from './dead-letter.js';
import type { Op } from './operators.js';
import type { FlushGuard } from './record-cache.js';
import { type MutableRecordContext, memoFormat, memoKeyBytes, startsWithBom } from './record-context.js';
import type { TaskProgress } from './task-progress.js';
import type { TimerGuard } from './task-state.js';
import { WATERMARK_HEADER } from './watermark.js';

export interface RecordLoopDeps {
  appId: string;
  partition: number;
  sub: SubTopology;
  rc: MutableRecordContext;
  progress: TaskProgress;
  shedder: TaskShedder;
  costs: OperatorCostSampler;
  metrics: WorkerMetrics;
  /** Recomputes the watermark after a record moved its partition's event time. */
  moveWatermark: () => void;
  /** The error policy's context (dead letters go to `progress.collector`). */
  deadLetter: Omit<DeadLetterContext, 'appId' | 'partition' | 'metrics' | 'emitter'>;
}

/**
 * The per-record work of a task: a batch of one input partition goes through the operators,
 * record by record (skip the prefix already applied, shed, deserialize, timestamp, move the
 * watermark, push; a record that fails in the user's code or deserialization goes to the error
 * policy, a fault of Sluice or the machine is thrown: the batch fails without committing and the
 * worker resets the task). Due timers run through {@link RecordLoop.timerGuard} likewise.
 */
export class RecordLoop {
  readonly #d: RecordLoopDeps;
  readonly #dlq: DeadLetterContext;

  constructor(deps: RecordLoopDeps) {
    this.#d = deps;
    this.#dlq = {
      ...deps.deadLetter,
      appId: deps.appId,
      partition: deps.partition,
      metrics: deps.metrics,
      emitter: deps.progress.collector,
    };
  }

  /**
   * Runs `run` (a timer's `onTimer`, an update flushed from the record cache, an async record's
   * effects) with the record context set to `ctx`, its outputs taken back if it throws, and what
   * it throws (an `OperatorError`) through `policy`, so the work after it still runs. A fault of
   * Sluice or the machine, and the `fail` policy's error, are rethrown. The context is restored.
   */
  guarded(
    ctx: {
      topic: string;
      offset: string;
      timestamp: number;
      headers: Record<string, unknown> | undefined;
      key: unknown;
      raw?: InRecord | undefined;
    },
    run: () => void,
    policy: (e: OperatorError) => void,
  ): void {
    const rc = this.#d.rc;
    const collector = this.#d.progress.collector;
    const { topic, offset, timestamp, headers, key, raw } = rc;
    rc.topic = ctx.topic;
    rc.offset = ctx.offset;
    rc.headers = ctx.headers;
    rc.timestamp = ctx.timestamp;
    rc.key = ctx.key;
    rc.raw = ctx.raw;
    const mark = collector.count;
    try {
      run();
    } catch (e) {
      collector.truncate(mark);
      if (!(e instanceof OperatorError)) throw e;
      policy(e);
    } finally {
      rc.topic = topic;
      rc.offset = offset;
      rc.timestamp = timestamp;
      rc.headers = headers;
      rc.key = key;
      rc.raw = raw;
    }
  }

  /**
   * Runs one due timer (fired by a record's watermark advance or by the periodic tick): with a
   * clean record context (no topic, offset or headers of whatever record came last: its outputs
   * carry none), through {@link guarded}, so the other due timers still fire.
   */
  readonly timerGuard: TimerGuard = (fire, timer) => {
    const ctx = { topic: '', offset: '', headers: undefined, timestamp: timer.ts, key: this.#d.rc.key };
    this.guarded(ctx, fire, (e) => applyTimerErrorPolicy(this.#dlq, timer, e));
  };

  /** An async record's effects, with its own context, a failure a dead letter of its input record. */
  readonly asyncGuard = (r: InFlight, apply: () => void): void => {
    const ctx = { ...r.rc, key: r.key, raw: r.raw as InRecord | undefined };
    this.guarded(ctx, apply, (e) => applyAsyncErrorPolicy(this.#dlq, r, e));
  };

  /** An update flushed from the record cache: a failure downstream is a dead letter of kind `cache`. */
  readonly cacheGuard: FlushGuard = (push, e, operator) => {
    const rc = this.#d.rc;
    const ctx = {
      topic: rc.topic,
      offset: rc.offset,
      timestamp: e.timestamp,
      headers: e.headers,
      key: e.key,
    };
    this.guarded(ctx, push, (err) =>
      applyCacheFlushErrorPolicy(this.#dlq, { key: e.key, timestamp: e.timestamp, operator }, err),
    );
  };

  /**
   * Processes a batch of one input partition, synchronously. Records below the task's position
   * (a re-fetch after a rebalance or a seek) are skipped: the task, not the consumer, knows
   * what it has applied to its state.
   */
  process(
    ops: ReadonlyMap<string, Op>,
    topic: string,
    records: InRecord[],
    resolveOffset: (o: string) => void,
  ): number {
    const op = ops.get(topic);
    const { sub, progress, metrics, appId } = this.#d;
    const source = sub.sources.get(topic);
    if (!op || !source || source.spec.kind !== 'source') return 0;
    const ks = source.spec.key;
    const textKeys = memoFormat(ks.fingerprint) === 'string';
    const vs = source.spec.value;
    const tsOf = source.spec.timestamp;
    const rc = this.#d.rc;
    const collector = progress.collector;
    const wm = progress.watermark;
    const known = progress.next.get(topic);
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
    // A repartition input's time is its upstream writers' announced watermarks (watermark control
    // records, which reach no operator), not the event times of its records: catch-up of one
    // upstream task does not make another's records late.
    const channel = source.spec.internal;
    let controls = 0;
    // A record makes its input active again (`processing.idleTimeoutMs`) before it moves anything.
    if (inWatermark && n > 0) wm.touch(topic, rc.now());
    let maxTs = wm.timeOf(topic) ?? Number.NEGATIVE_INFINITY;
    rc.topic = topic;
    rc.watermark = wm.value;
    const started = performance.now();
    const shedder = this.#d.shedder;
    const shedAtSource = shedder.atSource && shedder.p > 0;
    const shedBefore = shedder.shed;
    let shed = 0;
    for (let i = first; i < records.length; i++) {
      const r = records[i]!;
      if (channel) {
        const h = r.headers?.[WATERMARK_HEADER];
        if (h !== undefined && r.value === null) {
          controls++;
          if (wm.announce(topic, h as Buffer | string, rc.now())) this.#d.moveWatermark();
          continue;
        }
      }
      rc.offset = r.offset;
      rc.timestamp = Number(r.timestamp);
      // Shed before deserializing: the cheapest place. Its offset is committed like any other. A
      // record too large for the overflow topic is processed instead of lost.
      if (
        shedAtSource &&
        shedder.dropRandom() &&
        (!shedder.divert || divert(collector, shedder, r, topic, this.#d.partition))
      ) {
        shed++;
        continue;
      }
      rc.headers = r.headers as Record<string, unknown> | undefined;
      rc.raw = r;
      let key: unknown;
      let value: unknown;
      try {
        key = r.key === null ? null : ks.deserialize(r.key);
        // The bytes read are the key's serialization: a keyed operator or a sink takes them as is.
        if (textKeys && typeof key === 'string' && !startsWithBom(r.key!))
          memoKeyBytes(rc, key, 'string', r.key!);
        value = vs.deserialize(r.value);
        if (tsOf !== undefined) {
          rc.key = key;
          const t = tsOf === 'processing' ? rc.now() : tsOf(value, rc);
          if (typeof t !== 'number' || !Number.isFinite(t))
            throw new SerdeError(`timestamp extractor returned ${String(t)}, not a finite number`);
          rc.timestamp = t;
        }
      } catch (e) {
        if (isSluiceFault(e)) throw e;
        applyErrorPolicy(
          this.#dlq,
          topic,
          r,
          e instanceof SluiceError ? e : new SerdeError(safeString(e), e),
        );
        continue;
      }
      if (inWatermark && !channel && rc.timestamp > maxTs) {
        maxTs = rc.timestamp;
        wm.setTime(topic, maxTs);
        this.#d.moveWatermark();
      }
      // Taken after the watermark moved: what its timers emitted (closed windows) is not this
      // record's to take back if its operators throw; their state deletions commit too.
      const mark = collector.count;
      try {
        rc.key = key;
        this.#d.costs.next();
        op.push(key, value);
      } catch (e) {
        // Sluice's or the machine's fault (a state read failed): the batch fails uncommitted and
        // the worker resets the task; only the user's errors follow the error policy.
        if (isSluiceFault(e)) throw e;
        collector.truncate(mark);
        applyErrorPolicy(this.#dlq, topic, r, e);
      }
    }
    if (records.length > 0) resolveOffset(records[records.length - 1]!.offset);
    if (n > 0) {
      const next = BigInt(records[records.length - 1]!.offset) + 1n;
      progress.next.set(topic, next);
      progress.toCommit.set(topic, next);
    }
    progress.dirtyRecords += n;
    const data = n - controls;
    if (data > 0) {
      const busyMs = performance.now() - started;
      shedder.processed += data - shed;
      shedder.busyMs += busyMs;
      shedder.batches++;
      metrics.recordsIn.inc({ app: appId, topic }, data);
      // Counted with the batch (source and .shed() drops alike), so in step with records_in.
      if (shedder.shed > shedBefore)
        metrics.recordsShed.inc({ app: appId, reason: shedder.reason }, shedder.shed - shedBefore);
      metrics.processingTime.observe({ app: appId }, busyMs / 1000);
    }
    return data;
  }
}

/** Writes a shed record to the overflow topic; false when the topic cannot take it. */
function divert(
  collector: Collector,
  shedder: Pick<TaskShedder, 'overflowTopic' | 'overflowHeaders' | 'shed'>,
  r: InRecord,
  topic: string,
  partition: number,
): boolean {
  const headers = shedder.overflowHeaders(r, topic, partition);
  if (emitsWithin(collector, shedder.overflowTopic, r.key, r.value, Number(r.timestamp), headers))
    return true;
  shedder.shed--; // counted by dropRandom: it is processed instead
  return false;
}
