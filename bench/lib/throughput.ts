/**
 * One throughput run of bench/run.ts (and the capacity measurement of bench/latency.ts): fresh
 * topics, N records produced before the process starts, then the process under test until its
 * group has committed the whole input.
 *
 * - Headline rate: records/s between 10 % and 90 % of the input committed. The group's committed
 *   offsets are sampled every 100 ms through one admin connection (the sample's time is the middle
 *   of the request) and the times at 10 % and 90 % are interpolated (lib/steady.ts).
 * - Second column: N / (last − first output), the output topic's high-water mark watched at the
 *   same samples, ended when the input is all committed.
 * - Records out: the output's committed records, counted after the run by a read_committed
 *   reader (no transaction markers), for every system, so equal work can be checked.
 * - CPU s per million input records: utime + stime from "ready" (group joined) to the end.
 *   Peak RSS: VmHWM at the end.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTopics, deleteTopicsMatching, uniqueName } from '../../test/helpers/kafka.js';
import { eventMaker, type KeyDist, userRow } from '../workloads.js';
import type { Ceiling } from './ceilings.js';
import { countCommitted, poller, produceFast } from './kafka-io.js';
import { type Guarantee, type JobKind, type Proc, procStats, type SystemName, startProc } from './procs.js';
import type { RunResult } from './report.js';
import { type CommitSample, steadyRate } from './steady.js';

export interface Workload {
  id: string;
  kind: JobKind;
  dist: KeyDist;
  /** table rows (join) */
  table?: number;
  /** event time advances 10k records/s of input (windows) */
  eventTime?: boolean;
  alos: boolean;
  quick: boolean;
  /**
   * Kafka Streams' statestore.cache.max.bytes. 0 (no record cache: every update is an output)
   * wherever Sluice emits every update, which today is everywhere (Sluice has no record cache);
   * a "cached" variant compares cached with cached once Sluice has one.
   */
  ksCacheBytes: number;
  /** outputs for n inputs, where both systems must write exactly that many */
  expectedOut?: (n: number) => number;
}

/** Records whose kind is not "view" among the first n (kinds cycle view, view, click, buy). */
const nonViews = (n: number) => Math.floor(n / 4) * 2 + Math.max(0, (n % 4) - 2);
const all = (n: number) => n;

export const WORKLOADS: Workload[] = [
  {
    id: 'running-sum',
    kind: 'running-sum',
    dist: { keys: 1e4, dist: 'uniform' },
    alos: true,
    quick: true,
    ksCacheBytes: 0,
    expectedOut: all,
  },
  {
    id: 'count-1e4-uniform',
    kind: 'count',
    dist: { keys: 1e4, dist: 'uniform' },
    alos: true,
    quick: true,
    ksCacheBytes: 0,
    expectedOut: all,
  },
  {
    id: 'enrich',
    kind: 'enrich',
    dist: { keys: 1e5, dist: 'uniform' },
    alos: true,
    quick: true,
    ksCacheBytes: 0,
    expectedOut: all,
  },
  {
    id: 'map-filter',
    kind: 'map-filter',
    dist: { keys: 1e5, dist: 'uniform' },
    alos: true,
    quick: true,
    ksCacheBytes: 0,
    expectedOut: nonViews,
  },
  {
    id: 'count-1e3-uniform',
    kind: 'count',
    dist: { keys: 1e3, dist: 'uniform' },
    alos: false,
    quick: false,
    ksCacheBytes: 0,
    expectedOut: all,
  },
  {
    id: 'count-1e3-zipf',
    kind: 'count',
    dist: { keys: 1e3, dist: 'zipf' },
    alos: false,
    quick: false,
    ksCacheBytes: 0,
    expectedOut: all,
  },
  {
    id: 'count-1e5-uniform',
    kind: 'count',
    dist: { keys: 1e5, dist: 'uniform' },
    alos: false,
    quick: false,
    ksCacheBytes: 0,
    expectedOut: all,
  },
  {
    id: 'count-1e5-zipf',
    kind: 'count',
    dist: { keys: 1e5, dist: 'zipf' },
    alos: false,
    quick: false,
    ksCacheBytes: 0,
    expectedOut: all,
  },
  {
    id: 'count-1e6-uniform',
    kind: 'count',
    dist: { keys: 1e6, dist: 'uniform' },
    alos: false,
    quick: false,
    ksCacheBytes: 0,
    expectedOut: all,
  },
  {
    id: 'count-1e6-zipf',
    kind: 'count',
    dist: { keys: 1e6, dist: 'zipf' },
    alos: false,
    quick: false,
    ksCacheBytes: 0,
    expectedOut: all,
  },
  {
    id: 'window-10s',
    kind: 'window',
    dist: { keys: 1e3, dist: 'uniform' },
    eventTime: true,
    alos: false,
    quick: false,
    ksCacheBytes: 0,
    // Event time rises within each partition (the input is written in order): no record is late.
    expectedOut: all,
  },
  {
    id: 'join',
    kind: 'join',
    dist: { keys: 1e4, dist: 'uniform' },
    table: 1e4,
    alos: false,
    quick: false,
    ksCacheBytes: 0,
  },
];

export const seedOf = (id: string) => [...id].reduce((h, c) => (Math.imul(h, 31) + c.charCodeAt(0)) >>> 0, 7);
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const short = (s: SystemName) => (s === 'sluice' ? 'sl' : s === 'kafka-streams' ? 'ks' : 'cl');

export async function prepare(
  w: Workload,
  id: string,
  n: number,
  partitions: number,
  poll: Awaited<ReturnType<typeof poller>>,
) {
  const input = `${id}-in`;
  const output = `${id}-out`;
  const table = w.table ? `${id}-users` : undefined;
  await createTopics([
    { topic: input, partitions },
    { topic: output, partitions },
    ...(table ? [{ topic: table, partitions }] : []),
  ]);
  await poll.waitFor([input, output, ...(table ? [table] : [])]);
  if (table) await produceFast(table, w.table!, userRow);
  const make = eventMaker(seedOf(w.id), w.dist);
  // Windows: event time runs at 10k records/s and ends 1 s before now.
  const span = Math.ceil(n / 10);
  const base = Date.now() - span - 1000;
  const gen = w.eventTime
    ? (i: number) => ({ ...make(i), timestamp: String(base + Math.floor(i / 10)) })
    : make;
  const produceSeconds = n > 0 ? await produceFast(input, n, gen) : 0;
  return { input, output, table, make, produceSeconds };
}

/** After a run, whatever happened: the process, the poller, the state dir and the run's topics. */
export async function cleanUp(
  proc: Proc | undefined,
  poll: { close(): Promise<void> },
  stateDir: string,
  id: string,
) {
  // Under SLUICE_BENCH_NODE_ARGS (a --cpu-prof run), a clean stop first: the profile is written at exit.
  if (proc && process.env.SLUICE_BENCH_NODE_ARGS)
    await Promise.race([proc.kill('SIGTERM'), new Promise((r) => setTimeout(r, 15_000))]);
  await proc?.kill('SIGKILL');
  await poll.close();
  rmSync(stateDir, { recursive: true, force: true });
  await deleteTopicsMatching(id).catch(() => undefined);
}

export interface RunOptions {
  records: number;
  partitions: number;
  runTimeoutS: number;
  /** Stream threads of each system's one process (Sluice processing.threads, KS num.stream.threads) */
  threads?: number;
}

function emptyResult(w: Workload, system: string, guarantee: string, n: number): RunResult {
  return {
    workload: w.id,
    system,
    guarantee,
    ksCache:
      system === 'kafka-streams' ? (w.ksCacheBytes > 0 ? `${w.ksCacheBytes / 2 ** 20} MB` : 'off') : '—',
    records: n,
    recordsOut: Number.NaN,
    seconds: Number.NaN,
    throughput: Number.NaN,
    steadyThroughput: Number.NaN,
    cpuPerMillion: Number.NaN,
    hwmBytes: Number.NaN,
    startSeconds: Number.NaN,
  };
}

/** One throughput run of Sluice or Kafka Streams. */
export async function runOne(
  system: 'sluice' | 'kafka-streams',
  w: Workload,
  guarantee: Guarantee,
  o: RunOptions,
): Promise<RunResult> {
  const n = o.records;
  const id = uniqueName(`bench-${w.id}-${short(system)}-${guarantee === 'exactly_once' ? 'eos' : 'alo'}`);
  const res = emptyResult(w, system, guarantee, n);
  const stateDir = mkdtempSync(join(tmpdir(), 'sluice-bench-'));
  let proc: Proc | undefined;
  const poll = await poller();
  try {
    const t = await prepare(w, id, n, o.partitions, poll);
    const inputs = t.table ? [t.input, t.table] : [t.input];
    const total = n + (w.table ?? 0);
    const t0 = performance.now();
    proc = await startProc({
      system,
      kind: w.kind,
      appId: id,
      input: t.input,
      output: t.output,
      table: t.table,
      guarantee,
      stateDir,
      brokers: process.env.KAFKA_BROKERS!,
      ksCacheBytes: w.ksCacheBytes,
      threads: o.threads ?? 1,
    });
    // CPU is counted from "ready" (Kafka Streams RUNNING, Sluice /readyz 200): start-up and the
    // group join are left out, all the processing is in.
    let cpuReady = Number.NaN;
    void proc.ready(5 * 60_000).then(
      () => {
        cpuReady = procStats(proc!.pid).cpuSeconds;
      },
      () => undefined,
    );
    const deadline = t0 + o.runTimeoutS * 1000;
    const samples: CommitSample[] = [{ at: t0, committed: 0 }];
    let firstAt = 0;
    let lastAt = 0;
    let lastHigh = 0;
    for (;;) {
      if (performance.now() > deadline)
        throw new Error(
          `timed out (${o.runTimeoutS} s): output high-water mark ${lastHigh}, committed ${samples.at(-1)!.committed} of ${total}\n${proc.logs.slice(-10).join('\n')}`,
        );
      if (proc.child.exitCode !== null || proc.child.signalCode !== null)
        throw new Error(`exited early:\n${proc.logs.slice(-20).join('\n')}`);
      const before = performance.now();
      const [committed, high] = await Promise.all([poll.committed(id, inputs), poll.high(t.output)]);
      const at = (before + performance.now()) / 2;
      if (high > lastHigh) {
        lastHigh = high;
        lastAt = at;
        if (!firstAt) firstAt = at;
      }
      if (committed >= 0) samples.push({ at, committed });
      if (committed >= total && firstAt) {
        // Outputs come in chunks (one per commit), so the end is when the input is all committed.
        res.seconds = (Math.max(lastAt, at) - firstAt) / 1000;
        res.startSeconds = (firstAt - t0) / 1000;
        break;
      }
      await sleep(Math.max(0, 100 - (performance.now() - before)));
    }
    const st = procStats(proc.pid);
    res.throughput = n / res.seconds;
    res.steadyThroughput = steadyRate(samples, total);
    res.cpuPerMillion = ((st.cpuSeconds - cpuReady) / n) * 1e6;
    res.hwmBytes = st.hwmBytes;
    res.samples = samples.length;
    await proc.kill('SIGKILL');
    res.recordsOut = await countCommitted(t.output, `${id}-count`);
  } catch (e) {
    res.error = (e as Error).message.split('\n')[0]!.split(':')[0];
    console.error(`  ${system} ${w.id} ${guarantee}: ${(e as Error).message}`);
  } finally {
    await cleanUp(proc, poll, stateDir, id);
  }
  return res;
}

/**
 * The decode-only ceilings, one after the other on one input topic (the running sum's: same
 * records, 10,000 keys), each as a new group. Its steady rate is between the 10 % and 90 % records
 * decoded (the ceiling prints when), the second column first → last record.
 */
export async function runCeilings(
  list: Array<Ceiling | { name: string; error: string }>,
  o: RunOptions,
  log: (s: string) => void,
): Promise<RunResult[]> {
  const w = WORKLOADS.find((x) => x.id === 'running-sum')!;
  const n = o.records;
  const id = uniqueName('bench-ceiling');
  const poll = await poller();
  const stateDir = mkdtempSync(join(tmpdir(), 'sluice-bench-'));
  const out: RunResult[] = [];
  try {
    const t = await prepare(w, id, n, o.partitions, poll);
    for (const [i, c] of list.entries()) {
      const res = {
        ...emptyResult(w, `ceiling: ${c.name}`, '—', n),
        workload: 'decode only (running-sum input)',
      };
      out.push(res);
      if ('error' in c) {
        res.error = c.error;
        continue;
      }
      log(`ceiling: ${c.name}`);
      let proc: Proc | undefined;
      try {
        const t0 = performance.now();
        proc = await startProc({
          system: 'ceiling',
          kind: w.kind,
          appId: `${id}-g${i}`,
          input: t.input,
          output: t.output,
          guarantee: 'at_least_once',
          stateDir,
          brokers: process.env.KAFKA_BROKERS!,
          records: n,
          ceiling: c,
        });
        await proc.ready(60_000);
        const cpuReady = procStats(proc.pid).cpuSeconds;
        const line = (p: string) => proc!.lines.find((l) => l.startsWith(`${p} `));
        for (;;) {
          if (performance.now() - t0 > o.runTimeoutS * 1000)
            throw new Error(`timed out (${o.runTimeoutS} s)`);
          if (proc.child.exitCode !== null)
            throw new Error(`exited early:\n${proc.logs.slice(-20).join('\n')}`);
          if (line('DONE')) break;
          await sleep(50);
        }
        const st = procStats(proc.pid);
        const num = (p: string, k = 1) => Number(line(p)!.split(' ')[k]);
        res.seconds = (num('DONE') - num('FIRST')) / 1000;
        res.throughput = n / res.seconds;
        res.steadyThroughput = (0.8 * n) / ((num('P90') - num('P10')) / 1000);
        res.recordsOut = num('DONE', 2);
        res.cpuPerMillion = ((st.cpuSeconds - cpuReady) / n) * 1e6;
        res.hwmBytes = st.hwmBytes;
        log(`  ${Math.round(res.steadyThroughput)} records/s`);
      } catch (e) {
        res.error = (e as Error).message.split('\n')[0];
        console.error(`  ceiling ${c.name}: ${(e as Error).message}`);
      } finally {
        await proc?.kill('SIGKILL');
      }
    }
  } finally {
    await cleanUp(undefined, poll, stateDir, id);
  }
  return out;
}
