import type { SluiceConfig } from '../config/schema.js';
import type { BatchContext, GroupConsumer } from '../kafka/consumer.js';
import type { InRecord } from '../kafka/types.js';
import type { SubTopology } from '../topology/build.js';

/** What the input synchronization needs of its task (a `Task`). */
export interface SyncedTask {
  readonly sub: SubTopology;
  readonly partition: number;
  readonly state: string;
  positionOf(topic: string): bigint | undefined;
  process(topic: string, records: InRecord[], resolveOffset: (o: string) => void): number;
}

export interface InputSyncOptions {
  /** `processing.maxTaskIdleMs`: how long an input with nothing buffered may hold the others (-1: never). */
  maxTaskIdleMs: number;
  /** An input with this many bytes buffered is paused in the consumer until it drains below. */
  maxBufferedBytes: number;
  pause(topic: string, partition: number): void;
  resume(topic: string, partition: number): void;
  /** Records of `topic` handed to the task (for the input rate). */
  processed(topic: string, partition: number, n: number): void;
}

/** One input partition of a task: its fetched, not yet processed records. */
class Input {
  records: InRecord[] = [];
  head = 0;
  bytes = 0;
  /** The next offset to buffer (one past the last buffered record). */
  end: bigint | undefined;
  /** The last fetch of this partition reached its high watermark: nothing more is known to be there. */
  caughtUp = false;
  /** Wall time since when nothing is buffered (the task's start at first). */
  emptySince: number;
  paused = false;
  constructor(
    readonly topic: string,
    /** Ties at equal timestamps: a table (0) before a stream (1), so tables load up to the stream's time. */
    readonly rank: number,
    now: number,
  ) {
    this.emptySince = now;
  }
  get empty(): boolean {
    return this.head >= this.records.length;
  }
  clear(now: number): void {
    this.records = [];
    this.head = 0;
    this.bytes = 0;
    this.end = undefined;
    this.emptySince = now;
  }
}

const sizeOf = (r: InRecord) => 64 + (r.key?.length ?? 0) + (r.value?.length ?? 0);

/**
 * Timestamp order across the input partitions of one task (Kafka Streams' partition group with
 * `max.task.idle.ms`). The worker hands each fetched batch of a task with several inputs to
 * {@link add}, which buffers it (resolving its offsets in the consumer, so the fetch goes on);
 * {@link drain} then hands the task, run by run, the buffered record with the lowest timestamp
 * across its inputs (a table's before a stream's at equal times). An input with nothing buffered
 * holds the others back while it may still bring earlier records: unless its last fetch reached
 * the high watermark, for up to `maxTaskIdleMs` since it ran dry. Buffered records are not
 * processed, so not committed: after a crash they are fetched again from the committed offsets.
 * The task's positions decide what is valid: when they moved under the buffer (a reset went back
 * to the last checkpoint, whose init seeked the consumer), the buffer is dropped.
 */
export class InputSync {
  readonly #task: SyncedTask;
  readonly #o: InputSyncOptions;
  readonly #inputs: Input[];
  readonly #byTopic = new Map<string, Input>();
  /** The task's position per topic after the last run this sync handed it. */
  readonly #handed = new Map<string, bigint | undefined>();

  constructor(task: SyncedTask, opts: InputSyncOptions, now: number) {
    this.#task = task;
    this.#o = opts;
    this.#inputs = task.sub.sourceTopics.map((t) => {
      const s = task.sub.sources.get(t)?.spec;
      return new Input(t, s?.kind === 'source' && s.table ? 0 : 1, now);
    });
    for (const i of this.#inputs) this.#byTopic.set(i.topic, i);
  }

  /** Records buffered per input topic (for /status and tests). */
  buffered(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const i of this.#inputs) out[i.topic] = i.records.length - i.head;
    return out;
  }

  /**
   * A fetched batch: buffered (from the task's position on) and resolved in the consumer, then
   * {@link drain}ed. Returns 0: what is processed is counted through `processed`.
   */
  add(
    b: Pick<BatchContext, 'topic' | 'records' | 'highWatermark' | 'fetchedTo' | 'resolveOffset'>,
    now: number,
  ): 0 {
    this.#buffer(b.topic, b.records, b.highWatermark, b.fetchedTo, now);
    const last = b.records[b.records.length - 1];
    if (last) b.resolveOffset(last.offset);
    this.drain(now);
    return 0;
  }

  #buffer(topic: string, records: InRecord[], highWatermark: string, fetchedTo: string, now: number): void {
    const input = this.#byTopic.get(topic);
    if (!input) return;
    this.#checkPositions(now);
    this.fetched(topic, fetchedTo, highWatermark);
    const pos = this.#task.positionOf(topic);
    const from = input.end !== undefined && (pos === undefined || input.end > pos) ? input.end : pos;
    let first = 0;
    if (from !== undefined) while (first < records.length && BigInt(records[first]!.offset) < from) first++;
    if (first >= records.length) return;
    if (input.empty && input.head > 0) {
      input.records = [];
      input.head = 0;
    }
    for (let i = first; i < records.length; i++) {
      const r = records[i]!;
      input.records.push(r);
      input.bytes += sizeOf(r);
    }
    input.end = BigInt(records[records.length - 1]!.offset) + 1n;
    if (!input.paused && input.bytes >= this.#o.maxBufferedBytes) {
      input.paused = true;
      this.#o.pause(topic, this.#task.partition);
    }
  }

  /** A fetch of `topic` ended at `lastOffset` (markers included): is the partition caught up? */
  fetched(topic: string, lastOffset: string, highWatermark: string): void {
    const input = this.#byTopic.get(topic);
    if (input) input.caughtUp = BigInt(lastOffset) + 1n >= BigInt(highWatermark);
  }

  /**
   * Processes what timestamp order allows now. Throws what the task's processing throws (the
   * records of the failed run stay buffered; the worker resets the task).
   */
  drain(now: number): void {
    if (this.#task.state !== 'running') return;
    this.#checkPositions(now);
    try {
      this.#runs(now);
    } finally {
      this.#resumeDrained();
    }
  }

  /** Hands the task run after run while timestamp order allows. */
  #runs(now: number): void {
    for (;;) {
      let best: Input | undefined;
      let bestTs = 0;
      // The lowest (timestamp, rank) among the other inputs' heads: the run of `best` ends there.
      let boundTs = Number.POSITIVE_INFINITY;
      let boundRank = 0;
      for (const i of this.#inputs) {
        if (i.empty) {
          if (this.#mustWait(i, now)) return;
          continue;
        }
        const ts = Number(i.records[i.head]!.timestamp);
        if (best === undefined || ts < bestTs || (ts === bestTs && i.rank < best.rank)) {
          if (best !== undefined) [boundTs, boundRank] = [bestTs, best.rank];
          best = i;
          bestTs = ts;
        } else if (ts < boundTs || (ts === boundTs && i.rank < boundRank)) {
          boundTs = ts;
          boundRank = i.rank;
        }
      }
      if (best === undefined) return;
      const recs = best.records;
      let j = best.head + 1;
      while (j < recs.length) {
        const ts = Number(recs[j]!.timestamp);
        if (ts > boundTs || (ts === boundTs && best.rank >= boundRank)) break;
        j++;
      }
      const run = best.head === 0 && j === recs.length ? recs : recs.slice(best.head, j);
      const n = this.#task.process(best.topic, run, noResolve);
      this.#handed.set(best.topic, this.#task.positionOf(best.topic));
      for (let k = best.head; k < j; k++) best.bytes -= sizeOf(recs[k]!);
      best.head = j;
      if (best.empty) {
        best.records = [];
        best.head = 0;
        best.bytes = 0;
        best.emptySince = now;
      } else if (best.head >= 4096 && best.head * 2 >= recs.length) {
        // An input that never runs dry must not keep its processed prefix alive.
        best.records = recs.slice(best.head);
        best.head = 0;
      }
      if (n > 0) this.#o.processed(best.topic, this.#task.partition, n);
      if (this.#task.state !== 'running') return;
    }
  }

  /** Nothing buffered: wait for it unless its fetch is known to have reached the end, or waited enough. */
  #mustWait(i: Input, now: number): boolean {
    const max = this.#o.maxTaskIdleMs;
    return max >= 0 && !i.caughtUp && now - i.emptySince < max;
  }

  #resumeDrained(): void {
    for (const i of this.#inputs)
      if (i.paused && i.bytes < this.#o.maxBufferedBytes) {
        i.paused = false;
        this.#o.resume(i.topic, this.#task.partition);
      }
  }

  /** A reset or a new init moved the task's positions: what is buffered may not follow them. */
  #checkPositions(now: number): void {
    let moved = false;
    for (const i of this.#inputs) {
      const pos = this.#task.positionOf(i.topic);
      if (this.#handed.has(i.topic) && this.#handed.get(i.topic) !== pos) moved = true;
      this.#handed.set(i.topic, pos);
    }
    if (moved) this.clear(now);
  }

  /** Drops everything buffered (and resumes what was paused): the consumer refetches from the positions. */
  clear(now: number): void {
    for (const i of this.#inputs) {
      i.clear(now);
      i.caughtUp = false;
    }
    this.#resumeDrained();
  }
}

const noResolve = () => undefined;

/** The worker's input synchronizers: one per running task with several inputs, none for one input. */
export class InputSyncs {
  readonly #o: InputSyncOptions;
  readonly #syncs = new WeakMap<SyncedTask, InputSync>();
  /** The latest synchronizer per `topic:partition` (fetch ends without records reach it here). */
  readonly #byPartition = new Map<string, InputSync>();

  constructor(opts: InputSyncOptions) {
    this.#o = opts;
  }

  /**
   * The task's synchronizer, made at its first batch (its inputs' idle clocks start then); undefined
   * for a task with one input (processed as fetched, no cost).
   */
  of(task: SyncedTask): InputSync | undefined {
    if (task.sub.sourceTopics.length < 2) return undefined;
    let s = this.#syncs.get(task);
    if (!s) {
      this.#syncs.set(task, (s = new InputSync(task, this.#o, Date.now())));
      for (const t of task.sub.sourceTopics) {
        this.#byPartition.set(`${t}:${task.partition}`, s);
        // kafkajs keeps a pause across rebalances: a partition paused under an earlier task of
        // this worker (revoked, then assigned back) would never be fetched again.
        this.#o.resume(t, task.partition);
      }
    }
    return s;
  }

  /** Drains the task's synchronizer, if it has one (the periodic tick: waits that ran out). */
  drain(task: SyncedTask, now: number): void {
    this.#syncs.get(task)?.drain(now);
  }

  /** A fetch that held only transaction markers or aborted records (see {@link InputSync.fetched}). */
  fetched(topic: string, partition: number, lastOffset: string, highWatermark: string): void {
    this.#byPartition.get(`${topic}:${partition}`)?.fetched(topic, lastOffset, highWatermark);
  }
}

/**
 * A worker's synchronizers: a partition with twice `maxBytesPerPartition` buffered is paused until
 * it drains below (so a task buffers at most about three fetches per input partition).
 */
export function workerSyncs(
  p: Pick<SluiceConfig['processing'], 'maxTaskIdleMs' | 'maxBytesPerPartition'>,
  consumer: () => GroupConsumer | undefined,
  rate: { add(topic: string, partition: number, n: number): void },
): InputSyncs {
  return new InputSyncs({
    maxTaskIdleMs: p.maxTaskIdleMs,
    maxBufferedBytes: 2 * p.maxBytesPerPartition,
    pause: (t, partition) => consumer()?.pause(t, [partition]),
    resume: (t, partition) => consumer()?.resume(t, [partition]),
    processed: (t, partition, n) => rate.add(t, partition, n),
  });
}
