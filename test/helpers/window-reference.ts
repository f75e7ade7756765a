import assert from 'node:assert/strict';
import { rng } from './running-sum.js';
import { metricSum } from './workers.js';

/**
 * The window reference test's input, reference and checks, shared by the integration test
 * against a broker (test/integration/windows.test.ts) and the unit test with the test driver
 * (test/unit/testing/windows-reference.test.ts): both run the fixture job test/fixtures/jobs/windows.ts.
 */

export interface Rec {
  k: string;
  v: number;
  t: number;
  p: number;
}

export const OOO = 500; // processing.maxOutOfOrdernessMs
export const GRACE = 1000;
export const SIZE = 10_000;

/**
 * The reference: replays each partition in order with the watermark rule of the runtime
 * (W = max event time − allowed disorder, moved before the record is processed) and decides per
 * record which windows accept it. Results are then computed offline from the accepted records.
 */
export function reference(records: Rec[]) {
  const tumbling = new Map<string, number>(); // k|start → count
  const tumblingValues = new Map<string, number[]>();
  const lateTumbling: Rec[] = [];
  const hopping = new Map<string, number>(); // k|start → sum
  let hoppingLate = 0;
  const slidingAccepted = new Map<string, Rec[]>();
  let slidingLate = 0;
  const sessionAccepted = new Map<string, number[]>();
  let sessionLate = 0;
  const updates = new Map<string, number[]>();
  for (const p of new Set(records.map((r) => r.p))) {
    let max = Number.NEGATIVE_INFINITY;
    for (const r of records.filter((x) => x.p === p)) {
      if (r.t > max) max = r.t;
      const w = max - OOO;
      const start = Math.floor(r.t / SIZE) * SIZE;
      if (start + SIZE + GRACE > w) {
        const id = `${r.k}|${start}`;
        const n = (tumbling.get(id) ?? 0) + 1;
        tumbling.set(id, n);
        tumblingValues.set(id, [...(tumblingValues.get(id) ?? []), r.v]);
        updates.set(id, [...(updates.get(id) ?? []), n]);
      } else lateTumbling.push(r);
      let hopAccepted = false;
      for (let s = Math.floor(r.t / 5000) * 5000; s > r.t - SIZE; s -= 5000) {
        if (s + SIZE + GRACE <= w) continue;
        hopAccepted = true;
        hopping.set(`${r.k}|${s}`, (hopping.get(`${r.k}|${s}`) ?? 0) + r.v);
      }
      if (!hopAccepted) hoppingLate++;
      if (r.t + GRACE > w) {
        slidingAccepted.set(r.k, [...(slidingAccepted.get(r.k) ?? []), r]);
        sessionAccepted.set(r.k, [...(sessionAccepted.get(r.k) ?? []), r.t]);
      } else {
        slidingLate++;
        sessionLate++;
      }
    }
  }
  const sliding = new Map<string, { n: number; sum: number }>();
  for (const [k, rs] of slidingAccepted) {
    for (const end of new Set(rs.map((r) => r.t))) {
      const inside = rs.filter((r) => r.t >= end - 5000 && r.t <= end);
      sliding.set(`${k}|${end - 5000}`, { n: inside.length, sum: inside.reduce((a, r) => a + r.v, 0) });
    }
  }
  const session = new Map<string, { end: number; n: number }>();
  for (const [k, ts] of sessionAccepted) {
    const sorted = [...ts].sort((a, b) => a - b);
    let s = sorted[0]!;
    let e = s;
    let n = 0;
    for (const t of sorted) {
      if (t - e > 3000) {
        session.set(`${k}|${s}`, { end: e, n });
        s = t;
        n = 0;
      }
      e = t;
      n++;
    }
    session.set(`${k}|${s}`, { end: e, n });
  }
  return {
    tumbling,
    tumblingValues,
    lateTumbling,
    updates,
    hopping,
    hoppingLate,
    sliding,
    slidingLate,
    session,
    sessionLate,
  };
}

/** Output records as `k|start` → value, failing on any duplicate. */
export function byWindow(out: Array<{ key: string | null; value: string | null }>, flushKeys: Set<string>) {
  const m = new Map<string, any>();
  for (const r of out) {
    if (flushKeys.has(r.key!)) continue;
    const w = JSON.parse(r.value!);
    const id = `${r.key}|${w.start}`;
    assert.ok(!m.has(id), `window ${id} emitted twice`);
    m.set(id, w);
  }
  return m;
}

export type Reference = ReturnType<typeof reference>;

/** The fixture job's outputs, `<appId>-<name>`. */
export const WINDOW_OUTPUTS = [
  'tumbling',
  'updates',
  'hopping',
  'sliding',
  'session',
  'process',
  'late',
] as const;
export type WindowOutput = (typeof WINDOW_OUTPUTS)[number];

/**
 * The input of the window reference test: 2400 seeded records over 20 keys in partitions 0 and 1,
 * hand-made boundary and session records in partition 2, and a far-ahead flush record per partition.
 */
export function windowInput(): { records: Rec[]; flushKeys: Set<string> } {
  const random = rng(42);
  const records: Rec[] = [];
  // Partitions 0 and 1: 20 keys, event time rising ~50 ms per record with disorder up to 4 s
  // back (some records land behind the watermark by more than the grace: late).
  for (let i = 0; i < 2400; i++) {
    const ki = Math.floor(random() * 20);
    const jitter = random() < 0.15 ? -Math.floor(random() * 4000) : Math.floor(random() * 300);
    records.push({ k: `k${ki}`, v: 1 + Math.floor(random() * 9), t: 100_000 + i * 50 + jitter, p: ki % 2 });
  }
  // Partition 2: hand-made boundaries (disorder 500 ms, grace 1000 ms).
  const edge = [5000, 11_499, 9999, 11_500, 9998].map((t) => ({ k: 'edge', v: 1, t, p: 2 }));
  // Sessions (gap 3 s): 30000 and 33500 are separate until 32100 bridges them.
  const sess = [30_000, 33_500, 32_100].map((t) => ({ k: 'sess', v: 1, t, p: 2 }));
  records.push(...edge, ...sess);
  // A record far ahead in every partition closes every window above (its own stay open).
  const flushKeys = new Set(['flush0', 'flush1', 'flush2']);
  for (const p of [0, 1, 2]) records.push({ k: `flush${p}`, v: 0, t: 10_000_000, p });
  return { records, flushKeys };
}

/** How many records each output must hold (the flush keys' open windows emit nothing). */
export function expectedOutputs(ref: Reference, flushKeys: Set<string>): Record<WindowOutput, number> {
  const nonFlush = (m: Map<string, unknown>) =>
    [...m.keys()].filter((k) => !flushKeys.has(k.split('|')[0]!)).length;
  return {
    tumbling: nonFlush(ref.tumbling),
    late: ref.lateTumbling.length,
    updates: [...ref.updates]
      .filter(([k]) => !flushKeys.has(k.split('|')[0]!))
      .reduce((a, [, l]) => a + l.length, 0),
    process: nonFlush(ref.tumblingValues),
    hopping: nonFlush(ref.hopping),
    sliding: nonFlush(ref.sliding),
    session: nonFlush(ref.session),
  };
}

/** Checks every window output of the windows fixture job (test/fixtures/jobs/windows.ts) against the reference. */
export function checkWindowOutputs(
  ref: Reference,
  flushKeys: Set<string>,
  outs: Record<WindowOutput, Array<{ key: string | null; value: string | null }>>,
): void {
  const nonFlush = (m: Map<string, unknown>) => [...m.keys()].filter((k) => !flushKeys.has(k.split('|')[0]!));

  // Tumbling (count, late side output).
  const tumbling = byWindow(outs.tumbling, flushKeys);
  assert.equal(tumbling.size, nonFlush(ref.tumbling).length, 'one result per tumbling window');
  for (const id of nonFlush(ref.tumbling)) {
    const start = Number(id.split('|')[1]);
    assert.deepEqual(tumbling.get(id), { start, end: start + SIZE, value: ref.tumbling.get(id) }, id);
  }
  assert.equal(tumbling.get('edge|0')?.value, 2, '9999 is in (watermark 10999 < close 11000); 9998 is late');
  assert.equal(tumbling.get('edge|10000')?.value, 2);
  const late = outs.late;
  assert.deepEqual(
    late.map((r) => r.value).sort(),
    ref.lateTumbling.map((r) => JSON.stringify({ k: r.k, v: r.v, t: r.t })).sort(),
    'every late record in the side output, once',
  );
  assert.ok(ref.lateTumbling.length > 10, `the input has late records (${ref.lateTumbling.length})`);
  assert.ok(late.some((r) => JSON.parse(r.value!).t === 9998));

  // Every update, in order, ending at the final count.
  const updates = outs.updates;
  const seen = new Map<string, number[]>();
  for (const r of updates) {
    if (flushKeys.has(r.key!)) continue;
    const v = JSON.parse(r.value!);
    const id = `${r.key}|${v.start}`;
    seen.set(id, [...(seen.get(id) ?? []), v.value]);
  }
  for (const id of nonFlush(ref.updates))
    assert.deepEqual(seen.get(id), ref.updates.get(id), `updates of ${id}`);

  // Window process: all elements of the window.
  const proc = byWindow(outs.process, flushKeys);
  for (const id of nonFlush(ref.tumblingValues))
    assert.deepEqual(
      proc.get(id)?.value,
      [...ref.tumblingValues.get(id)!].sort((a, b) => a - b),
      id,
    );

  // Hopping (sum).
  const hopping = byWindow(outs.hopping, flushKeys);
  assert.equal(hopping.size, nonFlush(ref.hopping).length);
  for (const id of nonFlush(ref.hopping)) assert.equal(hopping.get(id)?.value, ref.hopping.get(id), id);

  // Sliding (count and sum over [t − 5 s, t]).
  const sliding = byWindow(outs.sliding, flushKeys);
  assert.equal(sliding.size, nonFlush(ref.sliding).length);
  for (const id of nonFlush(ref.sliding)) assert.deepEqual(sliding.get(id)?.value, ref.sliding.get(id), id);

  // Sessions, merged.
  const session = byWindow(outs.session, flushKeys);
  assert.equal(session.size, nonFlush(ref.session).length);
  for (const id of nonFlush(ref.session)) {
    const r = ref.session.get(id)!;
    assert.deepEqual(session.get(id), { start: Number(id.split('|')[1]), end: r.end, value: r.n }, id);
  }
  assert.deepEqual(
    session.get('sess|30000'),
    { start: 30_000, end: 33_500, value: 3 },
    '32100 bridged two sessions',
  );
}

/**
 * Late records counted per operator (`m`: the worker's metrics text) and retention: every closed
 * window was deleted, so the tumbling window's changelog ends with a tombstone for each key.
 */
export function checkLateAndRetention(
  ref: Reference,
  flushKeys: Set<string>,
  m: string,
  changelog: Array<{ key: string | null; value: string | null }>,
): void {
  // Late records counted per operator.
  const lateLines = m
    .split('\n')
    .filter((l) => l.startsWith('sluice_late'))
    .join('\n');
  assert.equal(
    metricSum(m, 'sluice_late_records_total', { operator: 'tumbling', action: 'side_output' }),
    ref.lateTumbling.length,
    lateLines,
  );
  assert.equal(
    metricSum(m, 'sluice_late_records_total', { operator: 'hopping', action: 'dropped' }),
    ref.hoppingLate,
  );
  assert.equal(
    metricSum(m, 'sluice_late_records_total', { operator: 'session', action: 'dropped' }),
    ref.sessionLate,
  );

  // Retention: every closed window was deleted, so the changelog ends with a tombstone per key.
  const lastByKey = new Map<string, string | null>();
  for (const r of changelog) lastByKey.set(r.key!, r.value);
  assert.ok(lastByKey.size >= 20);
  for (const [k, v] of lastByKey) {
    if (flushKeys.has(k)) assert.notEqual(v, null, 'the flush key still has its open window');
    else assert.equal(v, null, `key ${k}: closed windows deleted from the store`);
  }
}
