import type { CostAccount, CostProbe } from '../runtime/operators.js';
import type { GraphNode } from '../topology/nodes.js';

/** How often a record is timed through the operators: one in 64 (a power of two: a mask). */
const SAMPLE_MASK = 63;
/**
 * Records whose operators take this long (ms, sampled mean) are all timed: two clock reads per
 * operator are then under 0.5 % of the record, and one record in 64 would be a few samples a
 * second, whose mean a single preempted call moves by a third (seen: +35 % at load 7 on 2 cores).
 */
const TIME_EVERY_RECORD_MS = 0.05;

/**
 * Per-operator processing cost, sampled: the task calls `next()` for every record, and on one
 * record in 64 (on every record, while a record's operators take 50 µs or more) each operator's
 * push is timed (by the wrapper `compileOperators` puts around each
 * operator, which asks `on` and adds to the account `track` gave it). A push's time includes what
 * its downstream operators did with the record, so the cost of an operator itself is its time
 * less its children's (computed at collection). Unsampled records pay one counter increment per
 * record and one property read per operator.
 */
export class OperatorCostSampler implements CostProbe {
  /** True while the current record is being timed. */
  on = false;
  #n = 0;
  /** Every record is timed (the last collection's records were expensive). */
  #every = false;
  readonly #stats = new Map<number, { node: GraphNode; ms: number; n: number }>();

  /** Advances to the next record; decides whether it is timed. */
  next(): void {
    this.on = this.#every || (++this.#n & SAMPLE_MASK) === 0;
  }

  /**
   * A fresh account for an operator: `compileOperators` calls this for every operator but
   * sources and merges (pass-throughs), each time it compiles the task's operators.
   */
  track(node: GraphNode): CostAccount {
    const stat = { node, ms: 0, n: 0 };
    this.#stats.set(node.id, stat);
    return stat;
  }

  /** Each operator's own time since the last collection: name → (total ms, sampled pushes). */
  collect(): Map<string, { ms: number; n: number }> {
    const out = new Map<string, { ms: number; n: number }>();
    let total = 0;
    let records = 0;
    for (const s of this.#stats.values()) {
      if (s.n === 0) continue;
      let ms = s.ms;
      for (const c of s.node.children) ms -= this.#stats.get(c.id)?.ms ?? 0;
      out.set(s.node.name, { ms: Math.max(0, ms), n: s.n });
      total += Math.max(0, ms);
      records = Math.max(records, s.n);
    }
    // A sampled record's operators, all together: time every record while that is expensive.
    if (records > 0) this.#every = total / records >= TIME_EVERY_RECORD_MS;
    for (const s of this.#stats.values()) {
      s.ms = 0;
      s.n = 0;
    }
    return out;
  }
}
