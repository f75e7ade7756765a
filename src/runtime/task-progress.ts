import type { SluiceConfig } from '../config/schema.js';
import { Collector } from './collector.js';
import { Watermark } from './watermark.js';

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
  lastCheckpoint = Date.now();
  readonly watermark: Watermark;

  constructor(
    p: Pick<SluiceConfig['processing'], 'maxOutOfOrdernessMs' | 'idleTimeoutMs' | 'idleAdvanceMs'>,
  ) {
    this.watermark = new Watermark(p.maxOutOfOrdernessMs, {
      timeoutMs: p.idleTimeoutMs,
      advanceMs: p.idleAdvanceMs,
    });
    this.#idleness = p.idleTimeoutMs > 0 || p.idleAdvanceMs > 0;
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

  /** Throws away the outputs and offsets since the last checkpoint. */
  clear(): void {
    this.collector.clear();
    this.toCommit.clear();
    this.dirtyRecords = 0;
  }
}
