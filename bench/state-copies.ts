/**
 * Cost of the state handles' copies (issue 13.4: `get()` returns a copy, `set()` stores one) on a
 * read-modify-write process operator over the write-back cache (all hits, no RocksDB), records
 * per second, `copied` (a user processor) against `live` (the same processor marked as one of
 * Sluice's own, whose handles do not copy). Rounds alternate; medians are reported.
 *
 *   npx tsc && node dist/bench/state-copies.js [records=1000000] [rounds=5]
 */

import { liveState } from '../src/api/state.js';
import { App, json, string, valueState } from '../src/index.js';
import { createProcessOp } from '../src/runtime/keyed-process.js';
import { MutableRecordContext } from '../src/runtime/record-context.js';
import type { KeyedState } from '../src/runtime/task-state.js';
import { WriteBackCache } from '../src/state/write-back-cache.js';

const N = Number(process.argv[2] ?? 1_000_000);
const ROUNDS = Number(process.argv[3] ?? 5);
const KEYS = 1000;

type Shape = { name: string; init: () => unknown; step: (s: any) => unknown };
const shapes: Shape[] = [
  { name: 'number', init: () => 0, step: (s: number) => s + 1 },
  {
    name: 'object (4 fields)',
    init: () => ({ user: 'u1', count: 0, total: 0, tags: ['a', 'b'] }),
    step: (s) => {
      s.count++;
      s.total += 1.5;
      return s;
    },
  },
  {
    name: 'object (20 items)',
    init: () => ({ id: 'x', items: Array.from({ length: 20 }, (_, i) => ({ i, name: `n${i}`, v: i })) }),
    step: (s) => {
      s.items[0].v++;
      return s;
    },
  },
];

function build(shape: Shape, live: boolean) {
  const app = new App({ id: 'bench' });
  const processor = {
    state: { s: valueState<any>() },
    onRecord(_v: unknown, ctx: any) {
      const cur = ctx.state.s.get();
      ctx.state.s.set(shape.step(cur === undefined ? shape.init() : cur));
    },
  };
  app
    .stream('in', { key: string(), value: json() })
    .byKey()
    .process(live ? liveState(processor) : processor, { name: 'p' })
    .to('out');
  const node = app.topology().subtopologies[0]!.nodes.find((n) => n.spec.kind === 'process')!;
  const cache = new WriteBackCache<unknown>({
    maxBytes: 1 << 30,
    loader: () => ({ value: undefined, size: 64 }),
  });
  const st: KeyedState = { rocks: undefined as any, cache, noteWrite() {}, registerTimers() {} };
  return createProcessOp(node, { push() {} }, new MutableRecordContext(), st);
}

const keys = Array.from({ length: KEYS }, (_, i) => `k${i}`);
function rate(op: { push(k: unknown, v: unknown): void }): number {
  const t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) op.push(keys[i % KEYS], null);
  return N / (Number(process.hrtime.bigint() - t) / 1e9);
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

for (const shape of shapes) {
  const copied = build(shape, false);
  const live = build(shape, true);
  rate(copied);
  rate(live); // warm-up
  const r = { copied: [] as number[], live: [] as number[] };
  for (let i = 0; i < ROUNDS; i++) {
    r.live.push(rate(live));
    r.copied.push(rate(copied));
  }
  const c = median(r.copied);
  const l = median(r.live);
  console.log(
    `${shape.name.padEnd(18)} live ${Math.round(l).toLocaleString('en-US').padStart(11)} rec/s (${(1e9 / l).toFixed(0)} ns)  copied ${Math.round(c).toLocaleString('en-US').padStart(11)} rec/s (${(1e9 / c).toFixed(0)} ns)  +${(1e9 / c - 1e9 / l).toFixed(0)} ns per get+set`,
  );
}
