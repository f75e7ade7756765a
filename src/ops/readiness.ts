/**
 * Why /readyz says 503 while a worker joins its group. A join waits for the rebalance, which waits
 * for every member of the last generation to rejoin: one that died (SIGKILL, a lost machine) is
 * dropped only when its session times out, so a restart after a crash can wait up to
 * `kafka.sessionTimeoutMs` before the first assignment. Past a few seconds, say so.
 */
export function joiningReason(joiningForMs: number, sessionTimeoutMs: number): string {
  const s = Math.floor(joiningForMs / 1000);
  if (joiningForMs < 3000) return 'joining the group';
  return (
    `joining the group for ${s} s: the rebalance waits for every member of the last generation; ` +
    `one that died is dropped once its session times out (kafka.sessionTimeoutMs = ${sessionTimeoutMs} ms)`
  );
}

/** `/readyz`: running, assigned once, and no task restoring. */
export function readinessOf(w: {
  state: string;
  assignedOnce: boolean;
  joiningForMs: number;
  sessionTimeoutMs: number;
  tasks: Iterable<{ id: string; state: string }>;
}): { ready: boolean; reason?: string } {
  if (w.state !== 'running') return { ready: false, reason: `worker ${w.state}` };
  if (!w.assignedOnce) return { ready: false, reason: joiningReason(w.joiningForMs, w.sessionTimeoutMs) };
  const restoring = [...w.tasks].filter((t) => t.state !== 'running').map((t) => t.id);
  if (restoring.length > 0) return { ready: false, reason: `restoring ${restoring.join(', ')}` };
  return { ready: true };
}
