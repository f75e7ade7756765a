import type { BatchContext } from '../kafka/consumer.js';
import { withinSecond } from './deferred.js';
import { readAheadBatch } from './read-ahead.js';
import { SLICE_MS, type SliceSize } from './slice-size.js';
import type { Task } from './task.js';

export interface SliceHooks {
  /** The task's slice size, from its cost per record. */
  sizer: SliceSize;
  /** True while the worker runs `task` (not revoked, not replaced). */
  owns: (task: Task) => boolean;
  /** Starts a checkpoint (the task manager's: it handles a failure). */
  checkpoint: (task: Task) => void;
  /** Waits until the task's async stages have room, heartbeating meanwhile. */
  awaitRoom: () => Promise<void>;
  /** Waits until the task's checkpoint in flight settles, heartbeating meanwhile. */
  awaitIdle: () => Promise<void>;
}

/** When a waiting slice was last released (the loop is one per process: so is this). */
let lastTurn = performance.now();

/**
 * Milliseconds since a waiting slice was last released: an upper bound on how long the loop has
 * gone without a turn (it may have turned since, e.g. idle), so a batch after an idle spell waits
 * one turn it did not need.
 */
export const sinceTurn = (): number => performance.now() - lastTurn;

/** Slices waiting for their turn of the event loop, in order. */
const waiting: Array<() => void> = [];

/**
 * Lets the event loop run (I/O, timers), then goes on: one waiting slice per turn. Node runs every
 * immediate queued before its check phase in that one phase, so slices that each yielded with
 * their own `setImmediate` (one per partition being processed) still ran back to back without
 * the loop polling in between; one released per turn, the next queued from the check phase runs
 * only after the loop's next poll.
 */
function nextTurn(): Promise<void> {
  return new Promise<void>((r) => {
    waiting.push(r);
    if (waiting.length === 1) setImmediate(release);
  });
}

function release(): void {
  lastTurn = performance.now();
  waiting.shift()?.();
  if (waiting.length > 0) setImmediate(release);
}

/**
 * Processes a batch of one input partition, in slices: of the async stages' `concurrency` for
 * a task with async stages (waiting for room before each), else of about 2 ms of processing
 * ({@link SliceSize}); its keys are read ahead first (read-ahead.ts). Between two slices a due
 * checkpoint starts (its snapshot holds the slices before it, as Kafka Streams commits between
 * records) and the event loop runs once: checkpoint answers and timers do not wait for a whole
 * fetched batch (issue 19: ~10k records, 100 ms). So does it before the first slice when no
 * slice was released for more than a slice ({@link sinceTurn}): kafkajs runs a fetch's batch
 * handlers (several at once under `processing.concurrency`) in promise continuations, without the
 * loop turning between them, so batches that each fit in one slice held the loop for all of
 * them (in a CPU profile of the latency bench at 50 % load, such runs lasted 27 ms at the median
 * and up to 160 under the profiler). The unprocessed rest of a batch that went stale, or of a
 * task reset meanwhile (its position moved back), is fetched again.
 */
export async function processInSlices(
  task: Task,
  b: BatchContext,
  running: () => boolean,
  h: SliceHooks,
): Promise<number> {
  const fixed = task.async.chunk > 0 ? task.async.chunk : undefined;
  const sizer = h.sizer;
  readAheadBatch(task, b.topic, b.records, fixed ?? sizer.records);
  const slice = (from: number, to: number): number => {
    const started = performance.now();
    const records = from === 0 && to >= b.records.length ? b.records : b.records.slice(from, to);
    const n = task.process(b.topic, records, b.resolveOffset);
    sizer.observe(Math.min(to, b.records.length) - from, performance.now() - started);
    return n;
  };
  const waitFirst = sinceTurn() >= SLICE_MS;
  if (b.records.length <= (fixed ?? sizer.records) && !waitFirst) return slice(0, b.records.length);
  let n = 0;
  let at: bigint | undefined;
  for (let i = 0; i < b.records.length; ) {
    if (i > 0 || waitFirst) {
      // Not before the first slice: a checkpoint due now takes this batch's records if it
      // starts after them (#onBatch), instead of leaving them a whole interval.
      if (i > 0 && task.checkpointDue) h.checkpoint(task);
      await nextTurn();
      if (task.checkpointBacklogged) await h.awaitIdle();
    }
    if (task.async.backlogged) await h.awaitRoom();
    if (b.isStale() || !h.owns(task) || task.state !== 'running' || !running()) break;
    if (i > 0 && task.positionOf(b.topic) !== at) break;
    const to = i + (fixed ?? sizer.records);
    n += slice(i, to);
    i = to;
    at = task.positionOf(b.topic);
  }
  return n;
}

/**
 * Waits (in a batch handler) until `task` can process or is gone, heartbeating every second so
 * the group membership stays alive meanwhile; gives up as soon as `going()` turns false (the
 * worker stops, or the task is no longer its own: kafkajs's disconnect waits for the handler).
 */
export async function awaitReady(
  task: Task,
  heartbeat: () => Promise<void>,
  going: () => boolean,
): Promise<void> {
  const ready = task.whenReady().then(
    () => true,
    () => false,
  );
  for (;;) {
    const done = await withinSecond(ready);
    if (done !== 'tick' || !going()) return;
    await heartbeat();
  }
}

/**
 * Waits (in a batch handler) for the task's checkpoint in flight, like {@link awaitReady}: a
 * checkpoint that waits on the group (its worker's transaction gate, shut while the member
 * rejoins) must not hold the handler without heartbeats, or the member drops out of the group and
 * never sees the rebalance that would settle it.
 */
export async function awaitIdle(
  task: Task,
  heartbeat: () => Promise<void>,
  going: () => boolean,
): Promise<void> {
  const idle = task.idle();
  while ((await withinSecond(idle)) === 'tick' && going()) await heartbeat();
}

/** Waits (in a batch handler) until the task's async stages have room again, like {@link awaitReady}. */
export async function awaitRoom(
  task: Task,
  heartbeat: () => Promise<void>,
  going: () => boolean,
): Promise<void> {
  while (task.async.backlogged && going() && task.state === 'running') {
    if ((await withinSecond(task.async.room())) === 'tick') await heartbeat();
  }
}
