import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { createTopics, deleteTopicsMatching, jobTopics, produce, readAll } from '../helpers/kafka.js';
import { assertExactRunningSums, rng } from '../helpers/running-sum.js';
import { spawnWorker, type WorkerProcess } from '../helpers/workers.js';

const N = Number(process.env.TEST_CRASH_RECORDS ?? 300_000);
const KEYS = 500;
/** Every worker is SIGKILLed this many times per run (in a shuffled order). */
const KILL_ROUNDS = 2;

/** A Fisher-Yates shuffle of `xs` with the seeded `random`, so a failing schedule can be replayed. */
function shuffle<T>(xs: T[], random: () => number): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [xs[i], xs[j]] = [xs[j]!, xs[i]!];
  }
  return xs;
}

interface Out {
  k: string;
  sum: number;
  n: number;
  seq: number;
}

/**
 * Whether one of `workers` is not ready now (/readyz: still starting, joining or restoring): a
 * kill at that moment hits the group mid-recovery. Only reported, as it depends on timing.
 */
async function anyNotReady(workers: Array<WorkerProcess | undefined>): Promise<boolean> {
  const ready = (w: WorkerProcess) =>
    Promise.race([
      w
        .url()
        .then((u) => fetch(`${u}/readyz`, { signal: AbortSignal.timeout(500) }))
        .then((r) => r.status === 200),
      new Promise<boolean>((r) => setTimeout(() => r(false), 300)),
    ]).catch(() => false);
  const states = await Promise.all(workers.map((w) => (w ? ready(w) : false)));
  return states.some((r) => !r);
}

async function crashRun(
  t: TestContext,
  guarantee: 'exactly_once' | 'at_least_once',
  seed: number,
  /** Exactly-once: `worker` (EOS v2, the default) or `task` (EOS v1, per-task producers). */
  transactions: 'worker' | 'task' = 'worker',
) {
  const random = rng(seed);
  const topics = await jobTopics(guarantee === 'exactly_once' ? 't-eos' : 't-alos', 4);
  const { id, input, output } = topics;
  // Under exactly-once, also the running sum as a cached aggregate (record cache).
  const cached = guarantee === 'exactly_once' ? `${id}-cached` : undefined;
  if (cached) await createTopics([{ topic: cached, partitions: 4 }]);
  const env = cached ? { ...topics.env, TEST_CACHED_OUTPUT: cached } : topics.env;
  // Input: key k gets values v; expected prefix sums per key in input order (one input partition
  // per record key, re-keyed by k through the repartition topic).
  const values: Array<{ key: string; value: string }> = [];
  const expected = new Map<string, number[]>();
  const inputSeqs: number[] = [];
  for (let i = 0; i < N; i++) {
    const k = `k${Math.floor(random() * KEYS)}`;
    const v = 1 + Math.floor(random() * 9);
    values.push({ key: k, value: JSON.stringify({ k, v, seq: i }) });
    inputSeqs.push(i);
    const l = expected.get(k) ?? [];
    l.push((l[l.length - 1] ?? 0) + v);
    expected.set(k, l);
  }
  const args = ['--processing.guarantee', guarantee, '--processing.transactions', transactions];
  args.push('--log-level', 'info'); // info: the metrics URL, which anyNotReady reads
  const slots = [0, 1, 2].map((i) => ({
    name: `w${i}`,
    stateDir: mkdtempSync(join(tmpdir(), `sluice-${i}-`)),
  }));
  const workers: Array<WorkerProcess | undefined> = slots.map((s) =>
    spawnWorker('running-sum', { ...s, env, args }),
  );
  const cleanup = async () => {
    await Promise.all(workers.map((w) => w?.kill('SIGKILL')));
    await deleteTopicsMatching(id);
  };
  try {
    // Produce in slices while, concurrently, killing workers at random moments: a shuffled
    // round-robin over the workers (every worker killed KILL_ROUNDS times, in a random order),
    // with jittered pauses. About a third of the pauses are short, so that kill lands while the
    // previous victim (restarted) is still rejoining and restoring its state.
    // A PRNG of its own: the killer runs concurrently with the producer, so sharing one would
    // make the schedule depend on timing.
    const chaos = rng(seed + 1);
    const schedule: number[] = [];
    const ids = slots.map((_, i) => i);
    for (let r = 0; r < KILL_ROUNDS; r++) schedule.push(...shuffle([...ids], chaos));
    const kills = slots.map(() => 0);
    let killsWhileNotReady = 0;
    const killer = (async () => {
      await new Promise((r) => setTimeout(r, 1000 + chaos() * 1000));
      for (const victim of schedule) {
        if (await anyNotReady(workers.filter((_, i) => i !== victim))) killsWhileNotReady++;
        await workers[victim]!.kill('SIGKILL');
        kills[victim]!++;
        await new Promise((r) => setTimeout(r, chaos() * 1000));
        workers[victim] = spawnWorker('running-sum', { ...slots[victim]!, env, args });
        const short = chaos() < 1 / 3;
        await new Promise((r) => setTimeout(r, short ? 200 + chaos() * 600 : 1500 + chaos() * 2500));
      }
    })();
    const slices = 10;
    const per = Math.ceil(N / slices);
    for (let s = 0; s < slices; s++) {
      await produce(input, values.slice(s * per, (s + 1) * per));
      await new Promise((r) => setTimeout(r, 500 + random() * 1500));
    }
    await killer;
    t.diagnostic(
      `kills per worker: ${slots.map((s, i) => `${s.name}=${kills[i]}`).join(' ')}; ${killsWhileNotReady} while another worker was not ready (starting, joining or restoring)`,
    );
    for (const [i, s] of slots.entries())
      assert.ok(kills[i]! >= 2, `worker ${s.name} was SIGKILLed at least twice (${kills[i]})`);
    // Wait for the output to hold every update (EOS: exactly N; ALOS: at least N).
    const out = await readAll(output, {
      expected: N,
      timeoutMs: Number(process.env.TEST_CRASH_WAIT_MS ?? 240_000),
      settleMs: 4000,
    });
    if (out.length < N || process.env.TEST_DEBUG) {
      for (const w of workers) console.error(`--- ${w?.name} ---\n${w?.logs.slice(-40).join('\n')}`);
    }
    const cachedOut = cached ? await readAll(cached, { timeoutMs: 60_000, settleMs: 4000 }) : [];
    return { out, cachedOut, expected, inputSeqs, workers };
  } finally {
    await cleanup();
  }
}

test('exactly-once should survive repeated SIGKILLs of 3 workers: every running sum once, in order, exact', {
  timeout: 480_000,
}, async (t) => {
  const { out, cachedOut, expected } = await crashRun(t, 'exactly_once', 42, 'worker');
  assertExactRunningSums(out, expected);
  // The cached aggregate: per key, rising prefix sums (never one twice, never a wrong one),
  // ending with the key's total; fewer records than updates.
  const seen = new Map<string, number>();
  for (const r of cachedOut) {
    const v = JSON.parse(r.value!) as { k: string; sum: number; n: number };
    const before = seen.get(v.k) ?? 0;
    assert.ok(v.n > before, `key ${v.k}: update ${v.n} after ${before}`);
    assert.equal(v.sum, expected.get(v.k)![v.n - 1], `key ${v.k}: the sum of its first ${v.n} records`);
    seen.set(v.k, v.n);
  }
  for (const [k, sums] of expected) assert.equal(seen.get(k), sums.length, `key ${k}: its last update`);
  t.diagnostic(`cached aggregate: ${cachedOut.length} outputs for ${N} updates`);
  assert.ok(cachedOut.length < N, 'the record cache absorbed updates');
});

test('exactly-once with a producer per task (EOS v1) should survive the same SIGKILLs', {
  timeout: 480_000,
}, async (t) => {
  const { out, expected } = await crashRun(t, 'exactly_once', 43, 'task');
  assertExactRunningSums(out, expected);
});

test('at-least-once should survive repeated SIGKILLs without losing an update', {
  timeout: 480_000,
}, async (t) => {
  const { out, inputSeqs, expected } = await crashRun(t, 'at_least_once', 7);
  const seen = new Set<number>();
  for (const r of out) seen.add((JSON.parse(r.value!) as Out).seq);
  const missing = inputSeqs.filter((s) => !seen.has(s));
  assert.equal(missing.length, 0, `lost updates: ${missing.slice(0, 10).join(', ')}`);
  assert.ok(out.length >= N);
  // Every key's last output has counted at least all of its records.
  const lastN = new Map<string, number>();
  for (const r of out) {
    const v = JSON.parse(r.value!) as Out;
    lastN.set(v.k, Math.max(lastN.get(v.k) ?? 0, v.n));
  }
  for (const [k, sums] of expected)
    assert.ok((lastN.get(k) ?? 0) >= sums.length, `key ${k} counted every record`);
});
