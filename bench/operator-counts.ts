/**
 * Cost of the per-operator record counters behind the status page: a stateless chain
 * (source → map → filter → map → sink into a no-op emitter) compiled with and without counts,
 * records pushed through it per second. Runs alternate to even out a busy machine.
 *
 *   npx tsc && node dist/bench/operator-counts.js [records=2000000] [rounds=5]
 */
import { App, json } from '../src/index.js';
import { compileOperators } from '../src/runtime/operators.js';
import { MutableRecordContext } from '../src/runtime/record-context.js';

const N = Number(process.argv[2] ?? 2_000_000);
const ROUNDS = Number(process.argv[3] ?? 5);

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
const emitter = { emit: () => void emitted++ };

function run(counted: boolean): number {
  const rc = new MutableRecordContext();
  const counts = counted ? new Float64Array(16) : undefined;
  const op = compileOperators(sub.sources, rc, emitter, noState, undefined, counts).get('in')!;
  const value = { v: 1 };
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) op.push('k', value);
  return N / (Number(process.hrtime.bigint() - t0) / 1e9);
}

run(true);
run(false);
const rates = { without: [] as number[], with: [] as number[] };
for (let r = 0; r < ROUNDS; r++) {
  rates.without.push(run(false));
  rates.with.push(run(true));
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
const fmt = (n: number) => Math.round(n).toLocaleString('en-US').padStart(14);
console.log(`without counters ${fmt(median(rates.without))} records/s (median of ${ROUNDS})`);
console.log(`with counters    ${fmt(median(rates.with))} records/s (median of ${ROUNDS})`);
console.log(`emitted ${emitted}`);
