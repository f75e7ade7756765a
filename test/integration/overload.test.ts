import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deleteTopicsMatching, eventually, jobTopics, readAll } from '../helpers/kafka.js';
import { PacedProducer } from '../helpers/paced.js';
import { metricSum, spawnWorker, type WorkerProcess } from '../helpers/workers.js';

// Each record costs 2 ms in the job (mostly Atomics.wait: wall time without burning one of the
// shared cores), so one worker's capacity is ~450 records/s and the measurement is dominated by
// it. What Sluice does around it (fetching, decoding, producing, committing) is CPU work, which a
// busy machine stretches more than the wait: the shed test's ground-truth check has less margin
// there (see below).
const COST_US = 2000;
const H = 0.9;
/** Samples of C and the operator cost, 2 s apart: the kept fraction's window is this many × 2 s. */
const WINDOW_SAMPLES = 10;
const TAU_MS = 5000; // a bucket bound of the latency histogram, so p99 ≤ τ is read off exactly
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function overloadEnv(env: Record<string, string>, mode: string, kind = 'sleep'): Record<string, string> {
  return {
    ...env,
    TEST_COST_US: String(COST_US),
    TEST_COST_KIND: kind,
    SLUICE_OVERLOAD_MODE: mode,
    SLUICE_OVERLOAD_HEADROOM: String(H),
    SLUICE_OVERLOAD_LATENCY_TARGET_MS: String(TAU_MS),
    // A batch is processed synchronously, so its size bounds the added latency (32 KiB ≈ 750
    // records ≈ 1.5 s at full cost); much smaller fetches would cap what one fetch round brings
    // in below the arrival rate on a loaded machine: a standing backlog that lag/τ rightly counts.
    SLUICE_PROCESSING_MAX_BYTES_PER_PARTITION: '32768',
  };
}

async function ready(w: WorkerProcess): Promise<void> {
  const url = await w.url();
  await eventually(async () => (await fetch(`${url}/readyz`)).status === 200, {
    timeoutMs: 90_000,
    what: `${w.name} ready`,
  });
}

/** In this order: the producer must not write to a deleted topic (kafkajs would retry for long). */
async function cleanup(p: PacedProducer, ws: WorkerProcess[], id: string): Promise<void> {
  await p.stop();
  await Promise.all(ws.map((w) => w.kill('SIGKILL')));
  await deleteTopicsMatching(id);
}

interface Snapshot {
  at: number;
  sent: number;
  in: number;
  shed: number;
  latCount: number;
  latUnderTau: number;
  capacity: number;
  text: string;
}

async function snapshot(
  ws: WorkerProcess[],
  app: string,
  output: string,
  p: PacedProducer,
): Promise<Snapshot> {
  const texts = await Promise.all(ws.map((w) => w.metrics()));
  const sum = (name: string, labels: Record<string, string> = {}) =>
    texts.reduce((a, t) => a + metricSum(t, name, { app, ...labels }), 0);
  return {
    at: performance.now(),
    sent: p.sent,
    in: sum('sluice_records_in_total'),
    shed: sum('sluice_records_shed_total'),
    latCount: sum('sluice_end_to_end_latency_seconds_count', { topic: output }),
    latUnderTau: sum('sluice_end_to_end_latency_seconds_bucket', {
      topic: output,
      le: String(TAU_MS / 1000),
    }),
    capacity: sum('sluice_capacity'),
    text: texts.join('\n'),
  };
}

test('overload shed mode should keep H·C/λ of the input at 2x capacity, hold p99 latency under τ, and stop shedding below capacity', async (t) => {
  const { id, input, output, env } = await jobTopics('t-shed', 1);
  // The exact cost (see busy.ts), timed by the job: the check below is against the capacity it
  // really leaves.
  const w = spawnWorker('busy', { name: 'shed', env: overloadEnv(env, 'shed', 'exact') });
  const p = new PacedProducer(input, 1);
  t.after(() => cleanup(p, [w], id));
  await ready(w);

  // Calibration at about half the nominal capacity: the worker measures its own C.
  await p.start(200);
  const c0 = await eventually(async () => (await snapshot([w], id, output, p)).capacity, {
    timeoutMs: 30_000,
    what: 'a capacity estimate',
  });
  await sleep(3000);
  const cal = (await snapshot([w], id, output, p)).capacity || c0;
  assert.ok(cal > 100 && cal < 550, `capacity ${cal} rec/s should be near 1e6/${COST_US}`);

  // 2x capacity.
  const lambda = Math.round(2 * cal);
  p.setRate(lambda);
  await sleep(10_000); // settle: λ estimate, p smoothing
  // Start the window once the backlog of the switch is drained (the worker has seen all but a
  // fraction of a second of what was sent), so that what it processes in the window arrived in it.
  const a = await eventually<Snapshot | undefined>(
    async () => {
      const s = await snapshot([w], id, output, p);
      return s.in >= s.sent - 0.2 * lambda ? s : undefined;
    },
    { timeoutMs: 30_000, what: 'the backlog of the step to drain' },
  ).then((s) => s!);
  // The injected cost as the worker really incurred it: the job times every call (busy.ts).
  const costTotals = () => {
    for (let i = w.logs.length - 1; i >= 0; i--)
      if (w.logs[i]!.includes('"test_cost"')) return JSON.parse(w.logs[i]!) as { calls: number; ms: number };
    throw new Error('no test_cost line in the worker log');
  };
  const costA = costTotals();
  const caps: number[] = [];
  // The operator cost estimate averages one push in 64: a few samples a second, so one reading
  // misses the rare long calls (a preempted spin) that the incurred mean counts. Averaged like C.
  const opCosts: number[] = [];
  for (let i = 0; i < WINDOW_SAMPLES; i++) {
    await sleep(2000);
    const s = await snapshot([w], id, output, p);
    caps.push(s.capacity);
    opCosts.push(metricSum(s.text, 'sluice_operator_cost_seconds', { app: id, operator: 'cost' }));
  }
  const b = await snapshot([w], id, output, p);
  const costB = costTotals();
  // How the controller charged the out-of-chain work (fit or ratio), for the diagnostics.
  const loop = await fetch(`${await w.url()}/status`)
    .then((r) => r.json() as Promise<{ overload?: { outOfChain?: unknown } }>)
    .then((st) => {
      const o = st.overload as { outOfChain?: unknown; utilisation?: number; tasks?: unknown } | undefined;
      return `${JSON.stringify(o?.outOfChain ?? null)}; U ${o?.utilisation}, tasks ${JSON.stringify(o?.tasks ?? null)}`;
    })
    .catch((e: unknown) => `unavailable (${String(e)})`);
  const C = caps.reduce((x, y) => x + y, 0) / caps.length;
  const realLambda = ((b.sent - a.sent) * 1000) / (b.at - a.at);
  // Kept fraction = records kept / records processed in the window (≈ those that arrived in it).
  const kept = (b.in - a.in - (b.shed - a.shed)) / (b.in - a.in);
  const expected = (H * C) / realLambda;
  // Ground truth (issue 13 item 13): C_true = 1 / the injected cost's mean duration per call as
  // incurred in the window (the nominal 2 ms takes 2.02 ms on a quiet machine, 2.1–2.9 ms with
  // 5–30 runnable processes on the 2 cores: the wait wakes late, the spin waits for a core). The
  // worker's C is lower by Sluice's per-record work around the injected cost; the event loop's
  // per-batch work (fetch rounds, the five-request transaction every 100 ms commit interval), which
  // is large per record in the shedding regime's 6–22 small batches a second, is fitted apart and
  // not charged (OverloadController#outOfChain), so C is the rate the worker would have saturated.
  const costMs = (costB.ms - costA.ms) / (costB.calls - costA.calls);
  const cTrue = 1000 / costMs;
  const expectedTrue = (H * cTrue) / realLambda;
  // The operator chain's own rate (records per second of `sluice_process_duration_seconds`):
  // between it and C_true is Sluice's per-record work inside the chain (deserializing, shedding,
  // producing into the collector); between it and C, the worker's other event-loop work.
  const chainS =
    metricSum(b.text, 'sluice_process_duration_seconds_sum', { app: id }) -
    metricSum(a.text, 'sluice_process_duration_seconds_sum', { app: id });
  const cChain = (b.in - a.in - (b.shed - a.shed)) / chainS;
  const opCost = opCosts.reduce((x, y) => x + y, 0) / opCosts.length;
  const p99ok = (b.latUnderTau - a.latUnderTau) / (b.latCount - a.latCount);
  const pct = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)} %`;
  t.diagnostic(
    `window: sent ${b.sent - a.sent}, in ${b.in - a.in}, shed ${b.shed - a.shed}, ${((b.at - a.at) / 1000).toFixed(1)} s; share of outputs within τ=${TAU_MS} ms: ${p99ok.toFixed(4)}`,
  );
  t.diagnostic(
    `cost ${costMs.toFixed(3)} ms a call as incurred (${costB.calls - costA.calls} calls; nominal ${(COST_US / 1000).toFixed(3)} ms), operator cost estimate ${(opCost * 1e3).toFixed(3)} ms (${pct((opCost * 1e3) / costMs - 1)})`,
  );
  t.diagnostic(
    `C_true=${cTrue.toFixed(0)} rec/s, chain ${cChain.toFixed(0)} rec/s, C=${C.toFixed(0)} rec/s (${pct(C / cTrue - 1)}), λ=${realLambda.toFixed(0)} rec/s`,
  );
  t.diagnostic(`out-of-chain charge: ${loop}`);
  t.diagnostic(
    `kept ${kept.toFixed(3)} vs H·C_true/λ ${expectedTrue.toFixed(3)} (${pct(kept / expectedTrue - 1)}), vs H·C/λ ${expected.toFixed(3)} (${pct(kept / expected - 1)})`,
  );
  assert.ok(b.shed > a.shed, 'records are shed at 2x capacity');
  // Issue 13 item 13: the kept fraction against the injected cost's true capacity. C charges only
  // the per-record part of the loop's out-of-chain work (OverloadController#outOfChain), and the
  // window is 20 s: in 8 s windows it came out at +0.5 % to −7.8 % in seven runs and once at
  // −12.2 % (a fresh-clone CI run beside other jobs); in 12 s windows at −0.4 % to −9.6 % in eight
  // runs at load 6–10 on the 2 cores. What remains is Sluice's own per-record work (C is the
  // worker's capacity, a few % under the injected cost's) and the arrival-rate estimate's noise.
  assert.ok(
    Math.abs(kept / expectedTrue - 1) <= 0.1,
    `kept ${kept.toFixed(3)} not within ±10 % of H·C_true/λ = ${expectedTrue.toFixed(3)} (charge ${loop})`,
  );
  // The controller tracks its own estimate too.
  assert.ok(Math.abs(kept / expected - 1) <= 0.1, `kept ${kept} not within ±10 % of H·C/λ = ${expected}`);
  assert.ok(b.latCount - a.latCount > 500, 'outputs were observed in the window');
  assert.ok(
    Math.abs(opCost / (costMs / 1000) - 1) <= 0.25,
    `operator cost estimate ${opCost} s not within ±25 % of the injected cost as incurred, ${costMs / 1000} s`,
  );
  assert.ok(p99ok >= 0.99, `p99 end-to-end latency over τ: only ${p99ok} of outputs within ${TAU_MS} ms`);

  // Back to half the capacity: shedding stops.
  p.setRate(Math.round(cal / 2));
  // Once the controller says shedding stopped (the smoothed p fell to 0 after the 2x phase's
  // backlog drained), nothing more is shed.
  await eventually(() => w.logs.some((l) => l.includes('"shedding_stopped"')), {
    timeoutMs: 45_000,
    what: 'shedding to stop below capacity',
  });
  const c = await snapshot([w], id, output, p);
  await sleep(4000);
  const d = await snapshot([w], id, output, p);
  assert.equal(d.shed, c.shed, 'nothing shed once the rate is below capacity');
  assert.ok(d.in > c.in, 'still processing');
  assert.ok(
    w.logs.some((l) => l.includes('"shedding_started"')),
    'a log line when shedding starts',
  );
  assert.ok(
    w.logs.some((l) => l.includes('"shedding_stopped"')),
    'a log line when shedding stops',
  );
});

test('overload divert mode should write every shed record to <appId>-overflow in the same transaction: kept + overflow = input, exactly', async (t) => {
  const { id, input, output, env } = await jobTopics('t-divert', 2);
  const overflow = `${id}-overflow`;
  const w = spawnWorker('busy', { name: 'divert', env: overloadEnv(env, 'divert') });
  const p = new PacedProducer(input, 2);
  t.after(() => cleanup(p, [w], id));
  await ready(w);
  await p.start(900); // ~2x the nominal capacity of one worker
  await eventually(async () => (await snapshot([w], id, output, p)).shed > 0, {
    timeoutMs: 30_000,
    what: 'diverting to start',
  });
  await sleep(3000);
  const n = await p.stop();
  const outCount = (m: string, topic: string) => metricSum(m, 'sluice_records_out_total', { app: id, topic });
  const m = await eventually(
    async () => {
      const text = await w.metrics();
      return outCount(text, output) + outCount(text, overflow) === n ? text : '';
    },
    { timeoutMs: 60_000, what: 'every input record to be written to the output or the overflow topic' },
  );
  const kept = await readAll(output, { expected: outCount(m, output), timeoutMs: 30_000 });
  const diverted = await readAll(overflow, { expected: outCount(m, overflow), timeoutMs: 30_000 });
  t.diagnostic(`input ${n}, kept ${kept.length}, overflow ${diverted.length}`);
  assert.ok(diverted.length > 0 && kept.length > 0);
  assert.equal(kept.length + diverted.length, n, 'kept + overflow = input (read_committed)');
  const seen = new Set<number>();
  for (const r of [...kept, ...diverted]) {
    const seq = JSON.parse(r.value!).seq as number;
    assert.ok(!seen.has(seq), `seq ${seq} written twice`);
    seen.add(seq);
  }
  assert.equal(seen.size, n, 'every input record once');
  const h = diverted[0]!.headers;
  assert.equal(h['sluice.source.topic'], input, 'overflow records name their source');
  assert.ok(Number(h['sluice.shed.fraction']) > 0);
  assert.match(h['sluice.source.timestamp'] ?? '', /^\d+$/, "the record's own timestamp");
  assert.equal(metricSum(m, 'sluice_records_shed_total', { app: id, reason: 'random' }), diverted.length);
});

test('overload backpressure mode should drop nothing and keep memory bounded while the backlog grows', async (t) => {
  const { id, input, output, env } = await jobTopics('t-bp', 1);
  const w = spawnWorker('busy', { name: 'bp', env: overloadEnv(env, 'backpressure') });
  const p = new PacedProducer(input, 1);
  t.after(() => cleanup(p, [w], id));
  await ready(w);
  const rss = async () => metricSum(await w.metrics(), 'sluice_node_process_resident_memory_bytes');
  await p.start(900);
  await sleep(2000);
  const rss0 = await rss();
  let rssMax = rss0;
  let lagMax = 0;
  for (let i = 0; i < 6; i++) {
    await sleep(1000);
    const text = await w.metrics();
    rssMax = Math.max(rssMax, metricSum(text, 'sluice_node_process_resident_memory_bytes'));
    lagMax = Math.max(lagMax, metricSum(text, 'sluice_consumer_lag', { app: id }));
  }
  const n = await p.stop();
  const text = await eventually(
    async () => {
      const m = await w.metrics();
      return metricSum(m, 'sluice_records_out_total', { app: id, topic: output }) === n ? m : '';
    },
    { timeoutMs: 60_000, what: 'the backlog to drain' },
  );
  t.diagnostic(
    `input ${n}, max lag ${lagMax}, RSS ${(rss0 / 2 ** 20).toFixed(0)} MiB → max ${(rssMax / 2 ** 20).toFixed(0)} MiB`,
  );
  assert.ok(lagMax > 1000, `the worker was overloaded (max lag ${lagMax})`);
  assert.equal(metricSum(text, 'sluice_records_shed_total', { app: id }), 0, 'nothing shed');
  assert.ok(rssMax - rss0 < 48 * 2 ** 20, `RSS grew by ${(rssMax - rss0) / 2 ** 20} MiB`);
  const out = await readAll(output, { expected: n, timeoutMs: 30_000 });
  assert.equal(out.length, n, 'every record processed');
});

test('overload advisor should recommend 3 workers for one worker at over twice its capacity (U ≈ 2.1), and 3 workers should end the shedding', async (t) => {
  const { id, input, output, env } = await jobTopics('t-advise', 6);
  const e = overloadEnv(env, 'shed');
  const w1 = spawnWorker('busy', { name: 'w1', env: e });
  const ws = [w1];
  const p = new PacedProducer(input, 6);
  t.after(() => cleanup(p, ws, id));
  await ready(w1);
  // The load is set in the worker's own terms: U = Σ (λ + lag/τ) / C, the busy seconds per second
  // it would need. Start near 2x the nominal capacity, read U once settled and correct the rate
  // once, so that U ≈ 2.1: ⌈2.1 / 0.9⌉ = 3, and at three workers each runs at ≈ 0.7 < H. (At the
  // issue's 2.5x, three workers would run at 0.83, within the few % that C moves by when the
  // machine is shared: each worker gets less of a core, and C counts that.)
  const target = 2.1;
  let rate = target * 0.9 * (1e6 / COST_US);
  await p.start(rate);
  const utilisation = async () => (await w1.status()).overload?.utilisation ?? 0;
  await eventually(async () => (await utilisation()) > 1, { timeoutMs: 30_000, what: 'overload' });
  await sleep(6000);
  const u0 = await utilisation();
  rate = (rate * target) / u0;
  p.setRate(rate);
  // Settle: λ's estimate follows the new rate and the backlog of the switch drains (while it
  // lasts, lag/τ asks for more workers, as it should).
  await sleep(8000);
  // The advice must settle on 3 and hold for three evaluations in a row. C moves when the machine
  // is shared (another test file runs beside this one): while U has drifted out of the band where
  // 3 is the right answer, the rate is corrected again, at most every 8 s.
  const samples: string[] = [];
  let status: any;
  let sinceCorrection = 0;
  try {
    await eventually(
      async () => {
        const advice = metricSum(await w1.metrics(), 'sluice_recommended_workers', { app: id });
        status = await w1.status(); // the same advice on /status
        const u: number = status.overload?.utilisation ?? 0;
        samples.push(`${advice}@U=${u.toFixed(2)}`);
        if (samples.length >= 3 && samples.slice(-3).every((v) => v.startsWith('3@')))
          return status.overload.recommendedWorkers === 3;
        if (++sinceCorrection >= 8 && u > 0 && (u < 1.9 || u > 2.5)) {
          rate = (rate * target) / u;
          p.setRate(rate);
          sinceCorrection = 0;
        }
        return false;
      },
      { timeoutMs: 90_000, intervalMs: 1000, what: 'sluice_recommended_workers = 3, three times in a row' },
    );
  } catch (e) {
    throw new Error(`${(e as Error).message}; advice@U over time: ${samples.join(' ')}`, { cause: e });
  }
  t.diagnostic(`U=${u0.toFixed(2)} → rate ${rate.toFixed(0)}/s, overload ${JSON.stringify(status.overload)}`);
  t.diagnostic(`advice over time: ${samples.join(' ')}`);
  assert.equal(status.overload.recommendedWorkers, 3, '/status shows the advice too');
  assert.ok(status.overload.shedding, 'one worker sheds');
  assert.ok(status.overload.utilisation > 1.8, `one worker is overloaded ${status.overload.utilisation}x`);
  assert.ok(status.overload.utilisation <= 2.7, `U = ${status.overload.utilisation} (3 workers: ≤ 2.7)`);

  ws.push(spawnWorker('busy', { name: 'w2', env: e }), spawnWorker('busy', { name: 'w3', env: e }));
  await Promise.all(ws.map(ready));
  await eventually(
    async () => (await Promise.all(ws.map((w) => w.status()))).every((s) => s.tasks.length === 2),
    { timeoutMs: 60_000, what: 'two tasks on each of the 3 workers' },
  );
  // The rebalance's backlog drains and p decays to 0 on every worker. A worker that just started
  // charges its capacity by the event-loop ratio until its out-of-chain cost fit is trusted
  // (estimators.ts), which errs low while the loop is not full, so this may take a while on a
  // loaded machine. Then 5 s without one record shed.
  await eventually(
    async () =>
      (await Promise.all(ws.map((w) => w.status()))).every((s) => (s.overload?.shedFraction ?? 1) === 0),
    { timeoutMs: 90_000, intervalMs: 1000, what: 'no worker of 3 shedding' },
  );
  const a = await snapshot(ws, id, output, p);
  await sleep(5000);
  const b = await snapshot(ws, id, output, p);
  t.diagnostic(`3 workers: shed ${b.shed - a.shed} of ${b.in - a.in} in the last 5 s`);
  for (const w of ws) t.diagnostic(`${w.name}: ${JSON.stringify((await w.status()).overload)}`);
  assert.ok(b.in - a.in > 0);
  // At U ≈ 2.1 over 3 workers each runs at ≈ 0.7 of its capacity, under H = 0.9. On the shared
  // machine, though, what else runs there lowers the measured capacity (the injected 2 ms takes
  // up to 2.9 ms), and a worker may then briefly cross H and shed. That is the designed response,
  // so the check is that shedding ended, not that it cannot come back: under 2 % of the window.
  assert.ok(
    (b.shed - a.shed) / (b.in - a.in) < 0.02,
    `shedding did not end with 3 workers: ${b.shed - a.shed} of ${b.in - a.in} shed`,
  );
});

test('overload priority drops at a .shed() point should shed the lowest priorities first', async (t) => {
  const { id, input, output, env } = await jobTopics('t-prio', 1);
  const w = spawnWorker('busy', {
    name: 'prio',
    env: {
      ...overloadEnv(env, 'shed'),
      TEST_SHED: 'priority',
      SLUICE_OVERLOAD_PLACEMENT: 'operator',
      SLUICE_OVERLOAD_DROP: 'priority',
    },
  });
  const p = new PacedProducer(input, 1); // priority = seq % 4
  t.after(() => cleanup(p, [w], id));
  await ready(w);
  await p.start(0.9 * 2 * (1e6 / COST_US)); // ~2x: p ≈ 0.55, i.e. priorities 0 and 1, a little of 2
  await eventually(async () => metricSum(await w.metrics(), 'sluice_records_shed_total', { app: id }) > 0, {
    timeoutMs: 30_000,
    what: 'shedding to start',
  });
  await sleep(8000);
  const n = await p.stop();
  const m = await eventually(
    async () => {
      const text = await w.metrics();
      return metricSum(text, 'sluice_records_in_total', { app: id }) === n ? text : '';
    },
    { timeoutMs: 60_000, what: 'every record processed' },
  );
  const out = await readAll(output, {
    expected: metricSum(m, 'sluice_records_out_total', { app: id, topic: output }),
    timeoutMs: 30_000,
  });
  const kept = [0, 0, 0, 0];
  for (const r of out) kept[JSON.parse(r.value!).prio as number]!++;
  const sent = [0, 1, 2, 3].map((q) => Math.floor(n / 4) + (q < n % 4 ? 1 : 0));
  t.diagnostic(`sent ${n}; kept per priority 0..3: ${kept.map((k, q) => `${k}/${sent[q]}`).join(', ')}`);
  assert.ok(metricSum(m, 'sluice_records_shed_total', { app: id, reason: 'priority' }) > 0);
  assert.ok(kept[3]! >= 0.95 * sent[3]!, 'the highest priority is (almost) all kept');
  assert.ok(kept[0]! < 0.5 * sent[0]!, 'the lowest priority is shed most');
  // Compare kept fractions: the priorities may have one record more or less each.
  const frac = kept.map((k, q) => k / sent[q]!);
  assert.ok(
    frac[0]! <= frac[1]! && frac[1]! <= frac[2]! && frac[2]! <= frac[3]!,
    `kept rises with priority (${frac})`,
  );
});
