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

  constructor(maxOutOfOrdernessMs: number) {
    this.watermark = new Watermark(maxOutOfOrdernessMs);
  }

  /** Throws away the outputs and offsets since the last checkpoint. */
  clear(): void {
    this.collector.clear();
    this.toCommit.clear();
    this.dirtyRecords = 0;
  }
}
