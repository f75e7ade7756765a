import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deleteTopicsMatching, eventually, jobTopics, readAll } from '../helpers/kafka.js';
import { PacedProducer } from '../helpers/paced.js';
import { metricSum, spawnWorker, type WorkerProcess } from '../helpers/workers.js';

// Each record costs 1 ms in the job (Atomics.wait: wall time without burning one of the shared
// cores), so one worker's capacity is ~900 records/s and the measurement is dominated by it.
const COST_US = 1000;
const H = 0.9;
const TAU_MS = 2500; // a bucket bound of the latency histogram, so p99 ≤ τ is read off exactly
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function overloadEnv(env: Record<string, string>, mode: string): Record<string, string> {
  return {
    ...env,
    TEST_COST_US: String(COST_US),
    TEST_COST_KIND: 'sleep',
    SLUICE_OVERLOAD_MODE: mode,
    SLUICE_OVERLOAD_HEADROOM: String(H),
    SLUICE_OVERLOAD_LATENCY_TARGET_MS: String(TAU_MS),
    // Small fetches: a batch is processed synchronously, so its size bounds the added latency.
    SLUICE_PROCESSING_MAX_BYTES_PER_PARTITION: '16384',
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
  const w = spawnWorker('busy', { name: 'shed', env: overloadEnv(env, 'shed') });
  const p = new PacedProducer(input, 1);
  t.after(() => cleanup(p, [w], id));
  await ready(w);

  // Calibration at about half the nominal capacity: the worker measures its own C.
  await p.start(400);
  const c0 = await eventually(async () => (await snapshot([w], id, output, p)).capacity, {
    timeoutMs: 30_000,
    what: 'a capacity estimate',
  });
  await sleep(3000);
  const cal = (await snapshot([w], id, output, p)).capacity || c0;
  assert.ok(cal > 200 && cal < 1100, `capacity ${cal} rec/s should be near 1e6/${COST_US}`);

  // 2x capacity.
  const lambda = Math.round(2 * cal);
  p.setRate(lambda);
  await sleep(7000); // settle: λ estimate, p smoothing, the backlog of the switch drained
  const a = await snapshot([w], id, output, p);
  const caps: number[] = [];
  for (let i = 0; i < 4; i++) {
    await sleep(2000);
    caps.push((await snapshot([w], id, output, p)).capacity);
  }
  const b = await snapshot([w], id, output, p);
  const C = caps.reduce((x, y) => x + y, 0) / caps.length;
  const realLambda = ((b.sent - a.sent) * 1000) / (b.at - a.at);
  const kept = (b.in - a.in - (b.shed - a.shed)) / (b.in - a.in);
  const expected = (H * C) / realLambda;
  const p99ok = (b.latUnderTau - a.latUnderTau) / (b.latCount - a.latCount);
  t.diagnostic(
    `C=${C.toFixed(0)} rec/s, λ=${realLambda.toFixed(0)} rec/s, kept ${kept.toFixed(3)} vs H·C/λ ${expected.toFixed(3)} (${((kept / expected - 1) * 100).toFixed(1)} %), share of outputs within τ=${TAU_MS} ms: ${p99ok.toFixed(4)}`,
  );
  assert.ok(b.shed > a.shed, 'records are shed at 2x capacity');
  assert.ok(Math.abs(kept / expected - 1) <= 0.1, `kept ${kept} not within ±10 % of H·C/λ = ${expected}`);
  assert.ok(b.latCount - a.latCount > 1000, 'outputs were observed in the window');
  assert.ok(p99ok >= 0.99, `p99 end-to-end latency over τ: only ${p99ok} of outputs within ${TAU_MS} ms`);

  // Back to half the capacity: shedding stops.
  p.setRate(Math.round(cal / 2));
  await sleep(8000);
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
