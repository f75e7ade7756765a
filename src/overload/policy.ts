/**
 * The shedding and scaling formulas (Tatbul et al., VLDB 2003; Kalavri et al., DS2, OSDI 2018),
 * as pure functions of the estimates.
 */

/** One task's load, as the controller sees it each evaluation. */
export interface TaskLoad {
  /** Arrival rate on the task's input partitions (records/s). */
  lambda: number;
  /** Records between the task's position and the log ends. */
  lag: number;
  /** Records per busy second of the task's chain; undefined until measured. */
  capacity: number | undefined;
}

/**
 * Utilisation demand U: busy seconds per second that the worker would need to process every
 * arriving record and drain its backlog within τ. Tasks of one worker share one thread, so their
 * demands add up: U = Σ (λ_t + lag_t/τ) / C_t. A task without a capacity estimate yet adds nothing.
 */
export function demand(tasks: Iterable<TaskLoad>, latencyTargetS: number): number {
  let u = 0;
  for (const t of tasks) {
    if (t.capacity === undefined || t.capacity <= 0) continue;
    u += (Math.max(0, t.lambda) + Math.max(0, t.lag) / latencyTargetS) / t.capacity;
  }
  return u;
}

/**
 * The shed fraction p = max(0, 1 − H/U). With one task this is the textbook
 * p = max(0, 1 − H·C / (λ + lag/τ)); with several, every task sheds the same fraction, which keeps
 * the most records for a given busy time when their costs are equal.
 */
export function shedFraction(utilisation: number, headroom: number): number {
  if (!(utilisation > 0)) return 0;
  return Math.min(1, Math.max(0, 1 - headroom / utilisation));
}

/**
 * Smooths p (EWMA) and snaps small values to 0, so that shedding stops for good once the load is
 * back under the headroom instead of trickling on at 0.3 %.
 */
export function smoothShed(previous: number, raw: number, alpha: number): number {
  const p = alpha * raw + (1 - alpha) * previous;
  if (raw === 0 && p < 0.02) return 0;
  return Math.min(1, Math.max(0, p));
}

/**
 * DS2's recommendation: the workers needed so that each runs at most at the headroom H, given
 * the group's total demand in busy seconds per second (Σ over every input partition of
 * (λ_p + lag_p/τ) / C), clamped to [1, maxWorkers] (more workers than partitions would idle).
 */
export function recommendWorkers(groupDemand: number, headroom: number, maxWorkers: number): number {
  const max = Math.max(1, maxWorkers);
  if (!(groupDemand > 0)) return 1;
  // Round away float noise (2.7000000000000003 / 0.9) before the ceiling.
  const need = Math.ceil(Math.round((groupDemand / headroom) * 1e6) / 1e6);
  return Math.min(max, Math.max(1, need));
}
