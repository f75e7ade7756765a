import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  createTopics,
  deleteTopicsMatching,
  jobTopics,
  produce,
  readAll,
  type TestRecord,
} from '../helpers/kafka.js';
import { rng } from '../helpers/running-sum.js';
import { metricSum, spawnWorker } from '../helpers/workers.js';

interface Rec {
  k: string;
  v: number;
  t: number;
  p: number;
}

const OOO = 500; // processing.maxOutOfOrdernessMs
const GRACE = 1000;
const SIZE = 10_000;

/**
 * The reference: replays each partition in order with the watermark rule of the runtime
 * (W = max event time − allowed disorder, moved before the record is processed) and decides per
 * record which windows accept it. Results are then computed offline from the accepted records.
 */
function reference(records: Rec[]) {
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
function byWindow(out: Array<{ key: string | null; value: string | null }>, flushKeys: Set<string>) {
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

test('windows should equal a reference for tumbling, hopping, sliding and session windows, with out-of-order and late records, grace to the millisecond and closed windows deleted', {
  timeout: 240_000,
}, async (t) => {
  const { id, input, env } = await jobTopics('t-win', 3);
  const outs = ['tumbling', 'updates', 'hopping', 'sliding', 'session', 'process', 'late'];
  await createTopics(outs.map((o) => ({ topic: `${id}-${o}`, partitions: 3 })));
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
  const ref = reference(records);

  const w = spawnWorker('windows', {
    name: 'win',
    env: { ...env, TEST_GRACE: String(GRACE), SLUICE_PROCESSING_MAX_OUT_OF_ORDERNESS_MS: String(OOO) },
  });
  t.after(async () => {
    await w.kill('SIGKILL');
    await deleteTopicsMatching(id);
  });
  const toSend: TestRecord[] = records.map((r) => ({
    key: r.k,
    value: JSON.stringify({ k: r.k, v: r.v, t: r.t }),
    partition: r.p,
  }));
  await produce(input, toSend, 500);

  const read = (o: string, n: number) => readAll(`${id}-${o}`, { expected: n, timeoutMs: 90_000 });
  const nonFlush = (m: Map<string, unknown>) => [...m.keys()].filter((k) => !flushKeys.has(k.split('|')[0]!));

  // Tumbling (count, late side output).
  const tumbling = byWindow(await read('tumbling', nonFlush(ref.tumbling).length), flushKeys);
  assert.equal(tumbling.size, nonFlush(ref.tumbling).length, 'one result per tumbling window');
  for (const id of nonFlush(ref.tumbling)) {
    const start = Number(id.split('|')[1]);
    assert.deepEqual(tumbling.get(id), { start, end: start + SIZE, value: ref.tumbling.get(id) }, id);
  }
  assert.equal(tumbling.get('edge|0')?.value, 2, '9999 is in (watermark 10999 < close 11000); 9998 is late');
  assert.equal(tumbling.get('edge|10000')?.value, 2);
  const late = await read('late', ref.lateTumbling.length);
  assert.deepEqual(
    late.map((r) => r.value).sort(),
    ref.lateTumbling.map((r) => JSON.stringify({ k: r.k, v: r.v, t: r.t })).sort(),
    'every late record in the side output, once',
  );
  assert.ok(ref.lateTumbling.length > 10, `the input has late records (${ref.lateTumbling.length})`);
  assert.ok(late.some((r) => JSON.parse(r.value!).t === 9998));

  // Every update, in order, ending at the final count.
  const updates = await read(
    'updates',
    [...ref.updates].filter(([k]) => !flushKeys.has(k.split('|')[0]!)).reduce((a, [, l]) => a + l.length, 0),
  );
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
  const proc = byWindow(await read('process', nonFlush(ref.tumblingValues).length), flushKeys);
  for (const id of nonFlush(ref.tumblingValues))
    assert.deepEqual(
      proc.get(id)?.value,
      [...ref.tumblingValues.get(id)!].sort((a, b) => a - b),
      id,
    );

  // Hopping (sum).
  const hopping = byWindow(await read('hopping', nonFlush(ref.hopping).length), flushKeys);
  assert.equal(hopping.size, nonFlush(ref.hopping).length);
  for (const id of nonFlush(ref.hopping)) assert.equal(hopping.get(id)?.value, ref.hopping.get(id), id);

  // Sliding (count and sum over [t − 5 s, t]).
  const sliding = byWindow(await read('sliding', nonFlush(ref.sliding).length), flushKeys);
  assert.equal(sliding.size, nonFlush(ref.sliding).length);
  for (const id of nonFlush(ref.sliding)) assert.deepEqual(sliding.get(id)?.value, ref.sliding.get(id), id);

  // Sessions, merged.
  const session = byWindow(await read('session', nonFlush(ref.session).length), flushKeys);
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

  // Late records counted per operator.
  const m = await w.metrics();
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
  const changelog = await readAll(`${id}-tumbling-w-changelog`, { settleMs: 2000, timeoutMs: 30_000 });
  const lastByKey = new Map<string, string | null>();
  for (const r of changelog) lastByKey.set(r.key!, r.value);
  assert.ok(lastByKey.size >= 20);
  for (const [k, v] of lastByKey) {
    if (flushKeys.has(k)) assert.notEqual(v, null, 'the flush key still has its open window');
    else assert.equal(v, null, `key ${k}: closed windows deleted from the store`);
  }
});

test('processing-time windows should follow the wall clock, not the records’ timestamps', {
  timeout: 120_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-ptime', 1);
  const w = spawnWorker('processing-time', { name: 'ptime', env });
  t.after(async () => {
    await w.kill('SIGKILL');
    await deleteTopicsMatching(id);
  });
  await w.url();
  const before = Date.now();
  // Kafka timestamps from 1970: as event time every one would be in a long-closed window.
  const old = (n: number): TestRecord[] =>
    Array.from({ length: n }, (_, i) => ({ key: 'k', value: `r${i}`, timestamp: String(1000 + i) }));
  await produce(input, old(50));
  await new Promise((r) => setTimeout(r, 2500));
  await produce(input, old(1)); // moves the (wall-clock) watermark past the first window
  const out = await readAll(output, { expected: 1 });
  const results = out.map((r) => JSON.parse(r.value!));
  assert.ok(results.length >= 1);
  for (const r of results)
    assert.ok(r.start >= before - 1000 && r.start <= Date.now(), `window ${r.start} is by the clock`);
  assert.equal(
    results.reduce((a, r) => a + r.value, 0),
    50,
    'the first 50 records counted in closed wall-clock windows',
  );
  assert.equal(metricSum(await w.metrics(), 'sluice_late_records_total'), 0);
});
