import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { readCommittedWithJava } from '../../bench/java-reader.js';
import {
  brokers,
  createTopics,
  deleteTopicsMatching,
  produce,
  type ReadRecord,
  readAll,
  type TestRecord,
  uniqueName,
} from '../helpers/kafka.js';
import { rng } from '../helpers/running-sum.js';
import { diagnoseGroup, dumpWorkerLogs, spawnWorker, type WorkerProcess } from '../helpers/workers.js';

interface R {
  k: string;
  v: number;
  seq: number;
  t: number;
  p: number;
}

const PARTITIONS = 4;
const KEYS = 40;
const N_WINDOW = Number(process.env.TEST_WINDOW_CRASH_RECORDS ?? 20_000);
const N_JOIN = N_WINDOW / 2;

/**
 * When the test's kafkajs reader (which carries Sluice's kafkajs patches, so is partly the code
 * under test) has fewer records than expected: what Kafka's own console consumer reads
 * (read_committed) per partition beside it, and the workers' last own log lines. The same count
 * from both says Sluice's output is short; more from the console consumer says the reader is.
 */
async function diagnoseShortfall(
  t: TestContext,
  topic: string,
  got: ReadRecord[],
  expected: number,
  workers: readonly WorkerProcess[],
): Promise<void> {
  if (got.length >= expected) return;
  const perPartition = (l: ReadonlyArray<{ partition: number; offset: string | number }>) => {
    const m = new Map<number, { n: number; last: string }>();
    for (const r of l) {
      const e = m.get(r.partition) ?? { n: 0, last: '-' };
      m.set(r.partition, { n: e.n + 1, last: String(r.offset) });
    }
    return JSON.stringify([...m].sort((a, b) => a[0] - b[0]));
  };
  t.diagnostic(`${topic}: kafkajs reader ${got.length} of ${expected}, per partition ${perPartition(got)}`);
  try {
    const java = await readCommittedWithJava(brokers().join(','), topic, { withValues: false });
    t.diagnostic(`${topic}: console consumer ${java.length}, per partition ${perPartition(java)}`);
  } catch (e) {
    t.diagnostic(`${topic}: console consumer failed: ${String(e)}`);
  }
  dumpWorkerLogs(workers);
}

/**
 * The windows without a result, per input partition (key index mod 4): how many, and from which
 * window start. All missing from some start on says that partition's processing stopped there.
 */
function missingWindows(expected: Iterable<string>, got: ReadonlyMap<string, unknown>): string {
  const per = new Map<number, { n: number; from: number; to: number }>();
  for (const wid of expected) {
    if (got.has(wid)) continue;
    const [k, start] = wid.split('|') as [string, string];
    const p = Number(k.slice(1)) % PARTITIONS;
    const e = per.get(p) ?? { n: 0, from: Number.POSITIVE_INFINITY, to: Number.NEGATIVE_INFINITY };
    per.set(p, { n: e.n + 1, from: Math.min(e.from, Number(start)), to: Math.max(e.to, Number(start)) });
  }
  const parts = [...per]
    .sort((a, b) => a[0] - b[0])
    .map(([p, e]) => `input partition ${p}: ${e.n} (starts ${e.from}–${e.to})`);
  return `missing windows: ${parts.join('; ')}`;
}

const rec = (r: R): TestRecord => ({
  key: r.k,
  value: JSON.stringify({ k: r.k, v: r.v, seq: r.seq, t: r.t }),
  partition: r.p,
});

test('exactly-once should hold for a windowed aggregation and a stream-stream join through repeated SIGKILLs', {
  timeout: 480_000,
}, async (t) => {
  const random = rng(2026);
  const id = uniqueName('t-wcrash');
  const topic = (n: string) => `${id}-${n}`;
  await createTopics(
    ['a', 'b', 'c', 'windows', 'late', 'pairs'].map((n) => ({ topic: topic(n), partitions: PARTITIONS })),
  );
  const key = () => {
    const ki = Math.floor(random() * KEYS);
    return { k: `k${ki}`, p: ki % PARTITIONS };
  };
  // Windows: event time rises 5 ms per record; one in ten comes up to 1.5 s late (grace 200 ms).
  const a: R[] = [];
  for (let i = 0; i < N_WINDOW; i++) {
    const back = random() < 0.1 ? Math.floor(random() * 1500) : 0;
    a.push({ ...key(), v: 1 + Math.floor(random() * 9), seq: i, t: 1_000_000 + i * 5 - back });
  }
  // A far-future record per partition closes every window above it.
  for (let p = 0; p < PARTITIONS; p++) a.push({ k: `flush${p}`, v: 0, seq: -1, t: 9_000_000, p });
  // Reference: replay each partition in order (the watermark moves before a record is processed).
  const windows = new Map<string, { n: number; sum: number }>();
  const late: string[] = [];
  for (let p = 0; p < PARTITIONS; p++) {
    let max = Number.NEGATIVE_INFINITY;
    for (const r of a.filter((x) => x.p === p)) {
      max = Math.max(max, r.t);
      const start = Math.floor(r.t / 1000) * 1000;
      if (start + 1000 + 200 <= max) {
        late.push(JSON.stringify({ k: r.k, v: r.v, seq: r.seq, t: r.t }));
        continue;
      }
      if (r.k.startsWith('flush')) continue;
      const w = windows.get(`${r.k}|${start}`) ?? { n: 0, sum: 0 };
      windows.set(`${r.k}|${start}`, { n: w.n + 1, sum: w.sum + r.v });
    }
  }
  // Join: two streams with up to 500 ms of disorder, never late (within 300 + grace 2000).
  const b: R[] = [];
  const c: R[] = [];
  for (let i = 0; i < N_JOIN * 2; i++) {
    const side = random() < 0.5 ? b : c;
    side.push({ ...key(), v: 0, seq: i, t: 1_000_000 + i * 10 - Math.floor(random() * 500) });
  }
  const byKey = new Map<string, R[]>();
  for (const x of c) byKey.set(x.k, [...(byKey.get(x.k) ?? []), x]);
  const pairs: string[] = [];
  for (const x of b)
    for (const y of byKey.get(x.k) ?? [])
      if (Math.abs(x.t - y.t) <= 300) pairs.push(JSON.stringify({ b: x.seq, c: y.seq }));

  const env = { TEST_APP_ID: id };
  const args = ['--log-level', 'warn'];
  const slots = [0, 1, 2].map((i) => ({
    name: `w${i}`,
    stateDir: mkdtempSync(join(tmpdir(), `sluice-wc${i}-`)),
  }));
  const workers: Array<WorkerProcess | undefined> = slots.map((s) =>
    spawnWorker('window-join-crash', { ...s, env, args }),
  );
  // Every process, the killed ones too, for the logs of a failure.
  const spawned = workers.filter((w): w is WorkerProcess => w !== undefined);
  t.after(async () => {
    await Promise.all(workers.map((w) => w?.kill('SIGKILL')));
    await deleteTopicsMatching(id);
  });
  const slices = 10;
  let kills = 0;
  for (let s = 0; s < slices; s++) {
    const part = <T>(l: T[]) =>
      l.slice(Math.floor((s * l.length) / slices), Math.floor(((s + 1) * l.length) / slices));
    await produce(topic('a'), part(a).map(rec));
    await produce(topic('b'), part(b).map(rec));
    await produce(topic('c'), part(c).map(rec));
    await new Promise((r) => setTimeout(r, 500 + random() * 1500));
    if (s % 2 === 1 || s === slices - 1) {
      const victim = Math.floor(random() * workers.length);
      await workers[victim]!.kill('SIGKILL');
      kills++;
      await new Promise((r) => setTimeout(r, random() * 1000));
      workers[victim] = spawnWorker('window-join-crash', { ...slots[victim]!, env, args });
      spawned.push(workers[victim]!);
    }
  }
  assert.ok(kills >= 5, 'several SIGKILLs');

  const wait = { timeoutMs: 240_000, settleMs: 4000 };
  const outW = await readAll(topic('windows'), { ...wait, expected: windows.size });
  await diagnoseShortfall(t, topic('windows'), outW, windows.size, spawned);
  const got = new Map<string, unknown>();
  for (const r of outW) {
    if (r.key!.startsWith('flush')) continue;
    const v = JSON.parse(r.value!);
    const wid = `${r.key}|${v.start}`;
    assert.ok(!got.has(wid), `window ${wid} emitted twice`);
    got.set(wid, v.value);
  }
  if (got.size < windows.size) {
    t.diagnostic(missingWindows(windows.keys(), got));
    await diagnoseGroup(t, id, workers);
  }
  assert.equal(got.size, windows.size, 'every window result once');
  for (const [wid, v] of windows) assert.deepEqual(got.get(wid), v, wid);
  const outLate = await readAll(topic('late'), { ...wait, expected: late.length });
  await diagnoseShortfall(t, topic('late'), outLate, late.length, spawned);
  assert.ok(late.length > 100, `the input has late records (${late.length})`);
  assert.deepEqual(
    outLate.map((r) => r.value).sort(),
    late.sort(),
    'every late record once in the side output',
  );
  const outPairs = await readAll(topic('pairs'), { ...wait, expected: pairs.length });
  await diagnoseShortfall(t, topic('pairs'), outPairs, pairs.length, spawned);
  assert.ok(pairs.length > 1000, `the input makes pairs (${pairs.length})`);
  assert.equal(outPairs.length, pairs.length, 'join output count');
  assert.deepEqual(outPairs.map((r) => r.value).sort(), pairs.sort(), 'every pair once');
});
