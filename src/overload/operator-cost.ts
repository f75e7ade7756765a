import type { Op } from '../runtime/operators.js';
import type { GraphNode } from '../topology/nodes.js';

/** How often a record is timed through the operators: one in 64 (a power of two: a mask). */
const SAMPLE_MASK = 63;

/**
 * Per-operator processing cost, sampled: the task calls `next()` for every record, and on one
 * record in 64 each operator's push is timed. A push's time includes what its downstream
 * operators did with the record, so the cost of an operator itself is its time less its
 * children's (computed at collection). Unsampled records pay one counter increment per record and
 * one property read per operator.
 */
export class OperatorCostSampler {
  /** True while the current record is being timed. */
  on = false;
  #n = 0;
  readonly #stats = new Map<number, { node: GraphNode; ms: number; n: number }>();

  /** Advances to the next record; decides whether it is timed. */
  next(): void {
    this.on = (++this.#n & SAMPLE_MASK) === 0;
  }

  /** Wraps a compiled operator (sources and merges are pass-throughs and are left alone). */
  wrap(node: GraphNode, op: Op): Op {
    if (node.spec.kind === 'source' || node.spec.kind === 'merge') return op;
    const stat = { node, ms: 0, n: 0 };
    this.#stats.set(node.id, stat);
    const sampler = this;
    const timed: Op = {
      push(k, v) {
        if (!sampler.on) return op.push(k, v);
        const t = performance.now();
        try {
          op.push(k, v);
        } finally {
          stat.ms += performance.now() - t;
          stat.n++;
        }
      },
    };
    // Two-input operators (connect, joins) take records through `side`.
    if (op.side) {
      const side = op.side.bind(op);
      timed.side = (i, k, v) => {
        if (!sampler.on) return side(i, k, v);
        const t = performance.now();
        try {
          side(i, k, v);
        } finally {
          stat.ms += performance.now() - t;
          stat.n++;
        }
      };
    }
    return timed;
  }

  /** Each operator's own time since the last collection: name → (total ms, sampled pushes). */
  collect(): Map<string, { ms: number; n: number }> {
    const out = new Map<string, { ms: number; n: number }>();
    for (const s of this.#stats.values()) {
      if (s.n === 0) continue;
      let ms = s.ms;
      for (const c of s.node.children) ms -= this.#stats.get(c.id)?.ms ?? 0;
      out.set(s.node.name, { ms: Math.max(0, ms), n: s.n });
    }
    for (const s of this.#stats.values()) {
      s.ms = 0;
      s.n = 0;
    }
    return out;
  }
}
