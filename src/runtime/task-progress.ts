import type { SluiceConfig } from '../config/schema.js';
import type { SubTopology } from '../topology/build.js';
import { Collector, partitionsFrom } from './collector.js';
import { WATERMARK_HEADER, Watermark } from './watermark.js';

/**
 * What a task has read and written since its last checkpoint: filled by its record loop
 * (record-loop.ts), taken by its checkpoint (checkpoint.ts), cleared when the task (re)starts.
 */
export class TaskProgress {
  /** The outputs (and dead letters) of the records processed since the last checkpoint. */
  readonly collector = new Collector();
  /** Next offset to process per input topic; undefined = take what comes (no committed offset). */
  readonly next = new Map<string, bigint | undefined>();
  /** Offsets processed since the last checkpoint, to commit at the next one. */
  readonly toCommit = new Map<string, bigint>();
  /** Records processed since the last checkpoint (including dead-lettered ones). */
  dirtyRecords = 0;
  /** Bumped by {@link clear}: the task dropped what it did since its last checkpoint (a reset). */
  cleared = 0;
  /** The {@link cleared} of the run whose checkpoint failed: none of it commits any more. */
  failed = -1;
  lastCheckpoint = Date.now();
  readonly watermark: Watermark;

  constructor(
    p: Pick<SluiceConfig['processing'], 'maxOutOfOrdernessMs' | 'idleTimeoutMs' | 'idleAdvanceMs'>,
    sub?: SubTopology,
    /** The output topics' `max.message.bytes` (Collector.limits). */
    limits?: ReadonlyMap<string, number>,
  ) {
    this.collector.limits = limits;
    for (const n of sub?.nodes ?? [])
      if (n.spec.kind === 'sink' && n.spec.internal && !this.#announceTo.includes(n.spec.topic))
        this.#announceTo.push(n.spec.topic);
    this.watermark = new Watermark(p.maxOutOfOrdernessMs, {
      timeoutMs: p.idleTimeoutMs,
      advanceMs: p.idleAdvanceMs,
    });
    this.#idleness = p.idleTimeoutMs > 0 || p.idleAdvanceMs > 0;
  }

  /**
   * Outputs go into record batches as they come once this producer's metadata knows their topic
   * (collector.ts). A producer that cannot tell (the test driver's) leaves them plain records.
   */
  batchWith(producer: { partitionsOf?(topic: string): number | undefined }): void {
    this.collector.partitionsOf = partitionsFrom(producer);
  }

  /** Next offset to process per input topic, as text (/status); null before the first assignment. */
  positions(topics: readonly string[]): Record<string, string | null> {
    return Object.fromEntries(topics.map((t) => [t, this.next.get(t)?.toString() ?? null]));
  }

  readonly #idleness: boolean;

  /**
   * Moves the watermark at wall time `now` (see {@link Watermark.advance}): the new one, or
   * undefined. With idleness it may run ahead of what the committed event times give, so every
   * input's offset is committed again at the next checkpoint, carrying it (`{"w": ms}`): a task
   * restarted anywhere does not fall back and reopen the windows it closed.
   */
  advanceWatermark(now: number): number | undefined {
    const w = this.watermark.advance(now);
    if (w !== undefined && this.#idleness)
      for (const [t, o] of this.next) if (o !== undefined && !this.toCommit.has(t)) this.toCommit.set(t, o);
    return w;
  }

  /** Repartition topics this task writes: it announces its watermark into each of their partitions. */
  readonly #announceTo: string[] = [];
  /** Their partition count (the upstream sub-topology's: a repartition topic has its writer's). */
  #writers = 0;
  #writer = 0;
  #announced: number | undefined;

  /** How many partitions the repartition topics this task announces into have (0 for none). */
  async announceWriters(admin: { offsets(topic: string): Promise<unknown[]> }): Promise<number> {
    return this.#announceTo.length > 0 ? (await admin.offsets(this.#announceTo[0]!)).length : 0;
  }

  /** Starts announcing as `writer` (the task's partition) of `writers` (see {@link announceWriters}). */
  openAnnounce(writer: number, writers: number): void {
    this.#writer = writer;
    this.#writers = writers;
  }

  /** The watermark moved since it was last announced into the repartition topics. */
  get announceDue(): boolean {
    const w = this.watermark.value;
    return this.#writers > 0 && w !== undefined && w !== this.#announced;
  }

  /**
   * Announces the task's watermark downstream, as Flink does per channel: one control record
   * (no key, no value, {@link WATERMARK_HEADER} = `writer/writers/watermark`) into every partition
   * of every repartition topic it writes, after the records it wrote there, in the checkpoint's
   * transaction. Readers take the minimum over the writers (watermark.ts).
   */
  announce(): void {
    if (!this.announceDue) return;
    const w = this.watermark.value!;
    const headers = { [WATERMARK_HEADER]: `${this.#writer}/${this.#writers}/${w}` };
    for (const topic of this.#announceTo)
      for (let p = 0; p < this.#writers; p++)
        this.collector.emit(topic, null, null, Math.max(0, w), headers, p);
    this.#announced = w;
  }

  /** Throws away the outputs and offsets since the last checkpoint. */
  clear(): void {
    this.#announced = undefined;
    this.collector.clear();
    this.toCommit.clear();
    this.dirtyRecords = 0;
    this.cleared++;
  }
}
