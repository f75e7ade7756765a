/**
 * How many records of a fetched batch a task processes before the event loop runs again
 * (TaskManager.processBatch). A slice lasts about {@link SLICE_MS}: a checkpoint's next request
 * waits on the loop behind the slices running when its answer arrives, one per task processing,
 * and a checkpoint is two such waits in a row (Produce with TxnOffsetCommit, then EndTxn; its Add
 * requests went while its records were processed, TransactionalProducer.begin). Slices of a
 * fixed 1000 records took 10–20 ms each on the running sum, so four tasks' slices held an answer
 * up to 80 ms (the latency bench's event-loop delay, issue 19). The count follows the task's cost per record,
 * measured on its last slices: cheap records go 1000 at a time, an expensive operator (a join, a
 * window with many timers) a few at a time.
 */
export const SLICE_MS = 2;
/** At most this many records per slice (the per-slice cost, one loop turn, stays negligible). */
export const SLICE_RECORDS_MAX = 1000;
/** At least this many: a slow record does not make every slice pay a loop turn for itself alone. */
export const SLICE_RECORDS_MIN = 16;

export class SliceSize {
  #records = SLICE_RECORDS_MAX;

  /** The next slice's record count. */
  get records(): number {
    return this.#records;
  }

  /**
   * A slice of `records` took `ms`: the next one aims at {@link SLICE_MS}, at once when this one
   * was too long (an answer waiting on the loop should not wait behind several), halfway when it
   * was short. A slice of fewer than {@link SLICE_RECORDS_MIN} records says little (a batch of one
   * record is mostly the per-call cost) and is not counted.
   */
  observe(records: number, ms: number): void {
    if (records < SLICE_RECORDS_MIN) return;
    const fit = ms > 0 ? (SLICE_MS * records) / ms : SLICE_RECORDS_MAX;
    const next = Math.round(fit < this.#records ? fit : (this.#records + fit) / 2);
    this.#records = Math.min(SLICE_RECORDS_MAX, Math.max(SLICE_RECORDS_MIN, next));
  }
}
