import type { Task } from './task.js';
import type { WorkerTransactions } from './worker-transactions.js';

/**
 * How long a rejoin waits for the checkpoints it starts. A checkpoint is one transaction (tens of
 * milliseconds here); the bound only matters when the broker is slow or gone, and must stay well
 * below the rebalance timeout (60 s), within which the group waits for this member to rejoin.
 */
const REJOIN_CHECKPOINT_MS = 10_000;

/**
 * Before this member rejoins the group (eager rebalancing: any of its tasks may move), each
 * running task takes a checkpoint, as Kafka Streams commits its tasks in onPartitionsRevoked.
 * So a task handed to another member carries no uncommitted work there to be redone, and the
 * new owner's fence finds no transaction of ours in flight. A zombie's checkpoints are fenced
 * here (those tasks close as migrated). Bounded by `REJOIN_CHECKPOINT_MS`.
 *
 * Exactly-once v2 (`w`): then the commit gate shuts until the new assignment opens it, and the
 * worker's transaction in flight settles (bounded too). A join kafkajs retries finds the gate
 * shut already and goes on at once: nothing can commit meanwhile.
 */
export async function checkpointBeforeRejoin(
  tasks: Iterable<Task>,
  checkpoint: (t: Task) => Promise<void>,
  w: WorkerTransactions | undefined,
): Promise<void> {
  if (w !== undefined && !w.isOpen) return;
  const running = [...tasks].filter((t) => t.state === 'running' && t.hasPending);
  // A checkpoint in flight does not hold what was processed while it ran: wait for it, then
  // take one more of everything.
  const all = Promise.all(
    running.map(async (t) => {
      await t.idle();
      await checkpoint(t);
    }),
  );
  await within(all, REJOIN_CHECKPOINT_MS);
  if (w === undefined) return;
  // Shut first: a checkpoint queued while the last transaction ran (another fetcher's handler:
  // kafkajs rejoins from inside a fetch) would begin as that one ends, before a shut after it.
  w.shut();
  await within(w.idle(), REJOIN_CHECKPOINT_MS);
}

async function within(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<void>((r) => {
    timer = setTimeout(r, ms);
  });
  await Promise.race([p, bound]);
  clearTimeout(timer);
}
