/**
 * Cost of what wraps each compiled operator, on a stateless chain (source → map → filter → map →
 * sink into a no-op emitter), records pushed through it per second. Runs alternate to even out a
 * busy machine; medians are reported, and each variant's median ratio to the first one's run of
 * the same round.
 *
 * - `counts` (default): compiled with and without the per-operator record counters behind the
 *   status page.
 * - `wrappers`: `bare`, the same closures as `compileOperators` builds but with nothing around
 *   them, against `instrumented`, compiled as a task does: counts and the operator-cost sampler,
 *   `next()` before each record.
 *
 *   npx tsc && node dist/bench/operator-counts.js [records=2000000] [rounds=5] [counts|wrappers]
 */
import { App, json } from '../src/index.js';
import { OperatorCostSampler } from '../src/overload/operator-cost.js';
import { compileOperators, type Emitter, type Op } from '../src/runtime/operators.js';
import { MutableRecordContext } from '../src/runtime/record-context.js';
import type { GraphNode } from '../src/topology/nodes.js';

const N = Number(process.argv[2] ?? 2_000_000);
const ROUNDS = Number(process.argv[3] ?? 5);
const MODE = process.argv[4] ?? 'counts';

const app = new App({ id: 'bench' });
app
  .stream('in', { value: json<{ v: number }>() })
  .map((r) => ({ v: r.v + 1 }))
  .filter((r) => r.v >= 0)
  .map((r) => r)
  .to('out');
const sub = app.topology().subtopologies[0]!;
const noState = () => {
  throw new Error('stateless');
};
let emitted = 0;
const emitter: Emitter = { emit: () => void emitted++ };
const value = { v: 1 };

function rate(op: Op, costs?: OperatorCostSampler): number {
  const t0 = process.hrtime.bigint();
  if (costs) {
    for (let i = 0; i < N; i++) {
      costs.next();
      op.push('k', value);
    }
  } else {
    for (let i = 0; i < N; i++) op.push('k', value);
  }
  return N / (Number(process.hrtime.bigint() - t0) / 1e9);
}

/**
 * The chain's operators as `compileOperators` builds them (one closure per kind, as there), with
 * no wrapper at all: the floor the wrappers are measured against.
 */
function bare(node: GraphNode, rc: MutableRecordContext): Op {
  const next: Op = node.children.length ? bare(node.children[0]!, rc) : { push() {} };
  const s = node.spec;
  switch (s.kind) {
    case 'source':
      return next;
    case 'map': {
      const fn = s.fn;
      return {
        push(k, v) {
          rc.key = k;
          next.push(k, fn(v, rc));
        },
      };
    }
    case 'filter': {
      const fn = s.fn;
      return {
        push(k, v) {
          rc.key = k;
          if (fn(v, rc)) next.push(k, v);
        },
      };
    }
    case 'sink': {
      const { topic, key, value } = s;
      return {
        push(k, v) {
          emitter.emit(
            topic,
            k === null || k === undefined ? null : key.serialize(k),
            value.serialize(v),
            rc.timestamp,
            rc.headers,
          );
        },
      };
    }
    default:
      throw new Error(`not in the bench chain: ${s.kind}`);
  }
}

/** The bench chain's input operator, compiled as a task compiles it, with or without counts and costs. */
function compiled(counts?: Float64Array, costs?: OperatorCostSampler) {
  return compileOperators(
    sub.sources,
    new MutableRecordContext(),
    emitter,
    noState,
    undefined,
    counts,
    undefined,
    costs,
  ).get('in')!;
}

const variants: Record<string, Record<string, () => number>> = {
  counts: {
    'without counters': () => rate(compiled()),
    'with counters': () => rate(compiled(new Float64Array(16))),
  },
  wrappers: {
    bare: () => rate(bare(sub.sources.get('in')!, new MutableRecordContext())),
    instrumented: () => {
      const costs = new OperatorCostSampler();
      return rate(compiled(new Float64Array(16), costs), costs);
    },
  },
};
const runs = variants[MODE];
if (!runs) throw new Error(`mode ${MODE}: one of ${Object.keys(variants).join(', ')}`);

for (const run of Object.values(runs)) run();
const rates = new Map(Object.keys(runs).map((name) => [name, [] as number[]]));
for (let r = 0; r < ROUNDS; r++) {
  // Each round in turned order, so that no variant always runs right after the same other one.
  const order = Object.entries(runs);
  for (let i = 0; i < r % order.length; i++) order.push(order.shift()!);
  for (const [name, run] of order) rates.get(name)!.push(run());
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
const fmt = (n: number) => Math.round(n).toLocaleString('en-US').padStart(14);
const pct = (ratio: number) => `${ratio >= 1 ? '+' : '−'}${Math.abs((ratio - 1) * 100).toFixed(1)} %`;
const width = Math.max(...Object.keys(runs).map((n) => n.length));
// Against the first variant round by round too: a busy machine moves both runs of a round alike.
const [base, baseRates] = [...rates][0]!;
for (const [name, r] of rates) {
  const vs = name === base ? '' : `, ${pct(median(r.map((x, i) => x / baseRates[i]!)))} vs ${base} per round`;
  console.log(`${name.padEnd(width)} ${fmt(median(r))} records/s (median of ${ROUNDS}${vs})`);
}
console.log(`emitted ${emitted}`);
