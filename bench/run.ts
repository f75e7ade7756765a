/**
 * Sluice side by side with Kafka Streams, on one broker and one machine (issue 7).
 *
 *   npm run bench                 # full run (~15 min on 2 cores)
 *   npm run bench -- --quick      # smoke run (~2–3 min)
 *   npm run bench -- --only count-1e3-uniform,map-filter     # these workloads only
 *   npm run bench -- --only recovery --recovery-keys 100000   # the recovery test only
 *
 * `npm run bench` builds (tsc), builds the Kafka Streams peer (`mvn -q package` in
 * bench/peers/kafka-streams), then runs this file. It uses KAFKA_BROKERS when set, otherwise it
 * starts a local Kafka 4.4.0 on --kafka-port (default 19494, and 19495 for its controller) and stops it at the end.
 *
 * For every workload, system and guarantee, one fresh process on fresh topics (4 partitions):
 *  1. N records are produced before the process starts (deterministic, bench/workloads.ts).
 *  2. Throughput = N / (last output − first output), watched as the output topic's high-water mark
 *     every 50 ms, finished when the app's consumer group has committed the whole input (lag 0).
 *     CPU s per million records = CPU (utime + stime, /proc/<pid>/stat) used from "ready" (group
 *     joined) to the end, per million input records. Peak RSS = VmHWM at the end.
 *  3. Latency (same process, right after): records at a fixed rate below saturation, timestamped
 *     at send; a read_committed consumer of the output takes now − output record timestamp (both
 *     systems stamp an output with its input's timestamp); the first 2 s are warm-up.
 *  4. Recovery: a keyed count over K distinct keys (1e6 in the full run) is processed, the process
 *     is SIGKILLed, 20k more records arrive, the process is restarted on the same state dir:
 *     time until outputs resume and until the group's lag is back to 0.
 * The kafkajs ceiling is a plain consumer that only decodes the map-filter input.
 */
import { execFileSync, execSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, freemem, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createTopics, deleteTopicsMatching, uniqueName } from '../test/helpers/kafka.js';
import { endOffsets, observe, percentile, poller, produceAtRate, produceFast } from './lib/kafka-io.js';
import {
  COMMIT_INTERVAL_MS,
  type Guarantee,
  type JobKind,
  PEER_JAR,
  type Proc,
  procStats,
  root,
  SESSION_TIMEOUT_MS,
  type SystemName,
  sluiceJobPath,
  startProc,
} from './lib/procs.js';
import { fmt, type RecoveryResult, type RunResult, svgChart } from './lib/report.js';
import { eventMaker, type KeyDist, userRow } from './workloads.js';

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  quick: boolean;
  records: number;
  partitions: number;
  latencyRate: number;
  latencySeconds: number;
  recoveryKeys: number;
  recovery: boolean;
  alos: boolean;
  only: string[] | undefined;
  systems: SystemName[];
  write: boolean;
  runTimeoutS: number;
}

function parseOptions(argv: string[]): Options {
  const quick = argv.includes('--quick');
  const o: Options = {
    quick,
    records: quick ? 50_000 : 200_000,
    partitions: 4,
    latencyRate: quick ? 1000 : 2000,
    latencySeconds: quick ? 5 : 10,
    recoveryKeys: quick ? 100_000 : 1_000_000,
    recovery: !quick,
    alos: !quick,
    only: undefined,
    systems: ['sluice', 'kafka-streams'],
    write: true,
    runTimeoutS: 300,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    const num = () => {
      const v = Number(next());
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${a} expects a positive number`);
      return Math.floor(v);
    };
    switch (a) {
      case '--quick':
        break;
      case '--records':
        o.records = num();
        break;
      case '--partitions':
        o.partitions = num();
        break;
      case '--latency-rate':
        o.latencyRate = num();
        break;
      case '--latency-seconds':
        o.latencySeconds = num();
        break;
      case '--recovery-keys':
        o.recoveryKeys = num();
        o.recovery = true;
        break;
      case '--recovery':
        o.recovery = true;
        break;
      case '--no-recovery':
        o.recovery = false;
        break;
      case '--no-alos':
        o.alos = false;
        break;
      case '--only':
        o.only = next().split(',');
        break;
      case '--systems':
        o.systems = next().split(',') as SystemName[];
        for (const s of o.systems)
          if (s !== 'sluice' && s !== 'kafka-streams') throw new Error(`--systems: unknown system ${s}`);
        break;
      case '--run-timeout-s':
        o.runTimeoutS = num();
        break;
      case '--no-write':
        o.write = false;
        break;
      case '--kafka-port':
        i++; // handled by bench/bench.mjs
        break;
      default:
        throw new Error(`unknown option ${a}`);
    }
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// Workloads

interface Workload {
  id: string;
  kind: JobKind;
  dist: KeyDist;
  /** table rows (join) */
  table?: number;
  /** event time advances 10k records/s of input (windows) */
  eventTime?: boolean;
  latency: boolean;
  alos: boolean;
  quick: boolean;
}

const WORKLOADS: Workload[] = [
  {
    id: 'map-filter',
    kind: 'map-filter',
    dist: { keys: 100_000, dist: 'uniform' },
    latency: true,
    alos: true,
    quick: true,
  },
  {
    id: 'count-1e3-uniform',
    kind: 'count',
    dist: { keys: 1e3, dist: 'uniform' },
    latency: true,
    alos: true,
    quick: true,
  },
  {
    id: 'count-1e3-zipf',
    kind: 'count',
    dist: { keys: 1e3, dist: 'zipf' },
    latency: false,
    alos: false,
    quick: false,
  },
  {
    id: 'count-1e5-uniform',
    kind: 'count',
    dist: { keys: 1e5, dist: 'uniform' },
    latency: false,
    alos: false,
    quick: false,
  },
  {
    id: 'count-1e5-zipf',
    kind: 'count',
    dist: { keys: 1e5, dist: 'zipf' },
    latency: false,
    alos: false,
    quick: true,
  },
  {
    id: 'count-1e6-uniform',
    kind: 'count',
    dist: { keys: 1e6, dist: 'uniform' },
    latency: true,
    alos: false,
    quick: false,
  },
  {
    id: 'count-1e6-zipf',
    kind: 'count',
    dist: { keys: 1e6, dist: 'zipf' },
    latency: false,
    alos: false,
    quick: false,
  },
  {
    id: 'window-10s',
    kind: 'window',
    dist: { keys: 1e3, dist: 'uniform' },
    eventTime: true,
    latency: true,
    alos: false,
    quick: true,
  },
  {
    id: 'join',
    kind: 'join',
    dist: { keys: 1e4, dist: 'uniform' },
    table: 1e4,
    latency: true,
    alos: false,
    quick: true,
  },
];

const seedOf = (id: string) => [...id].reduce((h, c) => (Math.imul(h, 31) + c.charCodeAt(0)) >>> 0, 7);

/** Sluice jobs for windows and joins exist only once the DSL has them (issue 4). */
function available(system: SystemName, kind: JobKind): boolean {
  return system !== 'sluice' || existsSync(sluiceJobPath(kind));
}

// ---------------------------------------------------------------------------------------------
// One run: throughput, then latency on the same process

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const short = (s: SystemName) => (s === 'sluice' ? 'sl' : s === 'kafka-streams' ? 'ks' : 'cl');

async function prepare(
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
  // Windows: event time runs at 10k records/s and ends 1 s before now, so the latency phase
  // (stamped with the wall clock) continues it.
  const span = Math.ceil(n / 10);
  const base = Date.now() - span - 1000;
  const gen = w.eventTime
    ? (i: number) => ({ ...make(i), timestamp: String(base + Math.floor(i / 10)) })
    : make;
  const produceSeconds = await produceFast(input, n, gen);
  return { input, output, table, make, produceSeconds };
}

/** After a run, whatever happened: the system's process, the poller, the state dir and the run's topics. */
async function cleanUp(
  proc: Proc | undefined,
  poll: { close(): Promise<void> },
  stateDir: string,
  id: string,
) {
  await proc?.kill('SIGKILL');
  await poll.close();
  rmSync(stateDir, { recursive: true, force: true });
  await deleteTopicsMatching(id).catch(() => undefined);
}

async function runOne(
  system: SystemName,
  w: Workload,
  guarantee: Guarantee,
  o: Options,
  withLatency: boolean,
): Promise<RunResult> {
  const n = o.records;
  const id = uniqueName(`bench-${w.id}-${short(system)}-${guarantee === 'exactly_once' ? 'eos' : 'alo'}`);
  const res: RunResult = {
    workload: w.id,
    system,
    guarantee: system === 'kafkajs-ceiling' ? '—' : guarantee,
    records: n,
    recordsOut: Number.NaN,
    seconds: Number.NaN,
    throughput: Number.NaN,
    cpuPerMillion: Number.NaN,
    hwmBytes: Number.NaN,
    startSeconds: Number.NaN,
  };
  const stateDir = mkdtempSync(join(tmpdir(), 'sluice-bench-'));
  let proc: Proc | undefined;
  const poll = await poller();
  try {
    const t = await prepare(w, id, n, o.partitions, poll);
    const brokers = process.env.KAFKA_BROKERS!;
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
      brokers,
      records: n,
    });
    // CPU is counted from "ready" (Kafka Streams RUNNING, Sluice /readyz 200, ceiling joined):
    // start-up and the group join are left out, all the processing is in.
    let cpuReady = Number.NaN;
    void proc.ready(5 * 60_000).then(
      () => {
        cpuReady = procStats(proc!.pid).cpuSeconds;
      },
      () => undefined,
    );
    const deadline = t0 + o.runTimeoutS * 1000;
    let firstAt = 0;
    let lastAt = 0;
    let lastHigh = 0;
    let warmAt = 0;
    let warmLag = 0;
    const inputs = t.table ? [t.input, t.table] : [t.input];
    for (;;) {
      if (performance.now() > deadline) {
        const lags = await Promise.all(inputs.map(async (t) => `${t}: lag ${await poll.lag(id, [t])}`));
        throw new Error(
          `timed out (${o.runTimeoutS} s): output high-water mark ${lastHigh}, ${lags.join(', ')}\n${proc.logs.slice(-10).join('\n')}`,
        );
      }
      if (proc.child.exitCode !== null || proc.child.signalCode !== null)
        throw new Error(`exited early:\n${proc.logs.slice(-20).join('\n')}`);
      if (system === 'kafkajs-ceiling') {
        if (!firstAt && proc.lines.some((l) => l.startsWith('FIRST '))) firstAt = performance.now();
        const done = proc.lines.find((l) => l.startsWith('DONE '));
        if (done) {
          const first = Number(proc.lines.find((l) => l.startsWith('FIRST '))!.split(' ')[1]);
          const [, last, count] = done.split(' ');
          res.seconds = (Number(last) - first) / 1000;
          res.recordsOut = Number(count);
          res.startSeconds = (firstAt - t0) / 1000;
          break;
        }
      } else {
        const now = performance.now();
        const high = await poll.high(t.output);
        if (high > lastHigh) {
          lastHigh = high;
          lastAt = now;
          if (!firstAt) firstAt = now;
        }
        const lag = firstAt ? await poll.lag(id, inputs) : Number.POSITIVE_INFINITY;
        // The rate over the last 75 % of the input leaves JIT warm-up (the JVM's, V8's) out.
        if (firstAt && !warmAt && lag <= 0.75 * (n + (w.table ?? 0))) {
          warmAt = now;
          warmLag = lag;
        }
        if (firstAt && lag === 0) {
          if (lag === 0 && warmAt && performance.now() - warmAt > 200)
            res.warmThroughput = warmLag / ((performance.now() - warmAt) / 1000);
          // Outputs come in chunks (one per commit), so the end is when the input is all
          // committed (within 100 ms of the last output chunk), not the last chunk's poll.
          res.seconds = (Math.max(lastAt, performance.now()) - firstAt) / 1000;
          res.recordsOut = await poll.high(t.output); // the last commit may land after the poll above
          res.startSeconds = (firstAt - t0) / 1000;
          break;
        }
      }
      await sleep(50);
    }
    const st = procStats(proc.pid);
    res.throughput = n / res.seconds;
    res.cpuPerMillion = ((st.cpuSeconds - cpuReady) / n) * 1e6;
    res.hwmBytes = st.hwmBytes;

    if (withLatency && system !== 'kafkajs-ceiling') {
      const startAt = await endOffsets(t.output);
      const since = Date.now() + 2000;
      const obs = await observe(t.output, `${id}-observer`, startAt, since);
      try {
        const sent = await produceAtRate(t.input, o.latencyRate, o.latencySeconds, t.make, n);
        const until = performance.now() + 20_000;
        while (performance.now() < until && (await poll.lag(id, inputs)) > 0) await sleep(100);
        await sleep(1000); // the observer's last fetch
        res.p50 = percentile(obs.latencies, 50);
        res.p99 = percentile(obs.latencies, 99);
        res.latencySamples = obs.latencies.length;
        res.rate = o.latencyRate;
        if (sent === 0) throw new Error('latency phase sent nothing');
      } finally {
        await obs.stop();
      }
    }
  } catch (e) {
    res.error = (e as Error).message.split('\n')[0]!.split(':')[0];
    console.error(`  ${system} ${w.id} ${guarantee}: ${(e as Error).message}`);
  } finally {
    await cleanUp(proc, poll, stateDir, id);
  }
  return res;
}

// ---------------------------------------------------------------------------------------------
// Recovery after SIGKILL

async function recovery(system: SystemName, keys: number, o: Options): Promise<RecoveryResult> {
  const EXTRA = 20_000;
  const id = uniqueName(`bench-rec-${short(system)}`);
  const input = `${id}-in`;
  const output = `${id}-out`;
  const stateDir = mkdtempSync(join(tmpdir(), 'sluice-bench-'));
  const res: RecoveryResult = {
    system,
    keys,
    processSeconds: Number.NaN,
    extraRecords: EXTRA,
    resumeSeconds: Number.NaN,
    lagZeroSeconds: Number.NaN,
  };
  let proc: Proc | undefined;
  const poll = await poller();
  const spec = {
    system,
    kind: 'count' as const,
    appId: id,
    input,
    output,
    guarantee: 'exactly_once' as const,
    stateDir,
    brokers: process.env.KAFKA_BROKERS!,
  };
  try {
    await createTopics([
      { topic: input, partitions: o.partitions },
      { topic: output, partitions: o.partitions },
    ]);
    await poll.waitFor([input, output]);
    await produceFast(input, keys, eventMaker(1, { keys, dist: 'sequential' }));
    let t0 = performance.now();
    proc = await startProc(spec);
    while ((await poll.lag(id, [input])) > 0 || (await poll.high(output)) === 0) {
      if (performance.now() - t0 > 10 * 60_000) throw new Error('state build timed out');
      if (proc.child.exitCode !== null) throw new Error(`exited:\n${proc.logs.slice(-20).join('\n')}`);
      await sleep(250);
    }
    res.processSeconds = (performance.now() - t0) / 1000;
    await sleep(1000);
    await proc.kill('SIGKILL');
    await produceFast(input, EXTRA, eventMaker(2, { keys, dist: 'uniform' }), keys);
    const obs = await observe(output, `${id}-observer`, await endOffsets(output), 0);
    try {
      t0 = performance.now();
      proc = await startProc(spec);
      for (;;) {
        if (performance.now() - t0 > 5 * 60_000) throw new Error('recovery timed out');
        if (proc.child.exitCode !== null) throw new Error(`exited:\n${proc.logs.slice(-20).join('\n')}`);
        if (obs.firstAt() && Number.isNaN(res.resumeSeconds)) res.resumeSeconds = (obs.firstAt() - t0) / 1000;
        if (obs.firstAt() && (await poll.lag(id, [input])) === 0) {
          res.lagZeroSeconds = (performance.now() - t0) / 1000;
          break;
        }
        await sleep(100);
      }
    } finally {
      await obs.stop();
    }
  } catch (e) {
    res.error = (e as Error).message.split('\n')[0];
    console.error(`  recovery ${system}: ${(e as Error).message}`);
  } finally {
    await cleanUp(proc, poll, stateDir, id);
  }
  return res;
}

// ---------------------------------------------------------------------------------------------
// Report

function sh(cmd: string): string {
  try {
    return execSync(cmd, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch {
    return '?';
  }
}

function environment(o: Options, loadBefore: string): string[] {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const kjs = JSON.parse(readFileSync(join(root, 'node_modules/kafkajs/package.json'), 'utf8'));
  const pom = readFileSync(join(root, 'bench/peers/kafka-streams/pom.xml'), 'utf8');
  const ksVersion = /<kafka\.version>([^<]+)</.exec(pom)?.[1] ?? '?';
  const java = execFileSync('java', ['-version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return [
    `- command: \`npm run bench${process.argv.slice(2).length ? ` -- ${process.argv.slice(2).join(' ')}` : ''}\``,
    `- date: ${new Date().toISOString()}; git ${sh(`git -C ${root} rev-parse --short HEAD`)}${sh(`git -C ${root} status --porcelain -- src`) ? ' (src modified)' : ''}`,
    `- machine: ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), ${fmt(totalmem() / 2 ** 30, 1)} GiB RAM (${fmt(freemem() / 2 ** 30, 1)} free), ${process.platform}/${process.arch}; shared with other jobs`,
    `- load (uptime) before: ${loadBefore}; after: ${sh('uptime')}`,
    `- broker: ${process.env.BENCH_BROKER_DESC ?? process.env.KAFKA_BROKERS} (one broker, same for all systems)`,
    `- Sluice ${pkg.version}: node ${process.version}, kafkajs ${kjs.version}, one worker process`,
    `- Kafka Streams ${ksVersion}: ${sh('java -version 2>&1 | head -1') || java}, -Xms256m -Xmx1g -XX:+UseParallelGC, num.stream.threads=1, RocksDB stores, default record cache (10 MB)`,
    `- both: commit interval ${COMMIT_INTERVAL_MS} ms, session timeout ${SESSION_TIMEOUT_MS / 1000} s, ${o.partitions} partitions per topic, input keyed by user, JSON values of 140–160 bytes`,
    `- ${fmt(o.records)} input records per throughput run; latency at ${fmt(o.latencyRate)} records/s for ${o.latencySeconds} s (first 2 s dropped)`,
  ];
}

function report(o: Options, runs: RunResult[], recs: RecoveryResult[], env: string[]): string {
  const L: string[] = [];
  L.push(
    `# Sluice vs Kafka Streams${o.quick ? ' (quick smoke run)' : ''} — ${new Date().toISOString().slice(0, 10)}`,
  );
  L.push('');
  L.push(...env);
  L.push('');
  L.push('## Results');
  L.push('');
  L.push(
    'Throughput = input records / (last − first output), input fully consumed (group lag 0), outputs watched every 50 ms; records out include one transaction marker per partition and commit under exactly-once. "Last 75 %" = the rate from the moment a quarter of the input was committed to the end, i.e. after JIT warm-up. CPU = utime + stime of the process from ready (group joined) to the end, per million input records. Latency = output visible to a read_committed consumer − input timestamp, at a fixed rate. The machine is shared: repeat runs differ by ±20 % or more.',
  );
  L.push('');
  L.push(
    '| workload | system | guarantee | records in | records out | records/s | records/s, last 75 % | start → first output (s) | CPU s / M records | peak RSS (MB) | latency p50 (ms) | latency p99 (ms) |',
  );
  L.push('|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of runs)
    L.push(
      `| ${r.workload} | ${r.system} | ${r.guarantee} | ${fmt(r.records)} | ${fmt(r.recordsOut)} | ${r.error ? `failed: ${r.error}` : fmt(r.throughput)} | ${fmt(r.warmThroughput)} | ${fmt(r.startSeconds, 1)} | ${fmt(r.cpuPerMillion, 1)} | ${fmt(r.hwmBytes / 2 ** 20)} | ${fmt(r.p50)} | ${fmt(r.p99)} |`,
    );
  L.push('');
  L.push('## Ratio Sluice / Kafka Streams (same workload and guarantee)');
  L.push('');
  L.push(
    '| workload | guarantee | throughput (first → last output) | throughput (last 75 %) | CPU per record | peak RSS | latency p50 | latency p99 |',
  );
  L.push('|---|---|---:|---:|---:|---:|---:|---:|');
  for (const s of runs.filter((r) => r.system === 'sluice')) {
    const k = runs.find(
      (r) => r.system === 'kafka-streams' && r.workload === s.workload && r.guarantee === s.guarantee,
    );
    if (!k) continue;
    const q = (a?: number, b?: number) => (a !== undefined && b !== undefined && b > 0 ? fmt(a / b, 2) : '—');
    L.push(
      `| ${s.workload} | ${s.guarantee} | ${q(s.throughput, k.throughput)} | ${q(s.warmThroughput, k.warmThroughput)} | ${q(s.cpuPerMillion, k.cpuPerMillion)} | ${q(s.hwmBytes, k.hwmBytes)} | ${q(s.p50, k.p50)} | ${q(s.p99, k.p99)} |`,
    );
  }
  L.push('');
  L.push(
    'Above 1 is better for Sluice in the throughput columns, below 1 in the others. The two throughput columns disagree because each system is biased differently: Sluice reads a large first batch before its first checkpoint makes any output visible (so "first → last output" flatters it), while the JVM is still compiling during the first part of the input (so it flatters Kafka Streams in "last 75 %" compared with its own first → last rate). With few records (--quick, small --records) Sluice can read the whole input before its first commit: then its first → last rate is meaningless and "last 75 %" is empty; use the full run\'s 200k records.',
    '',
  );
  const sj = runs.find((r) => r.workload === 'join' && r.system === 'sluice' && !r.error);
  const kj = runs.find((r) => r.workload === 'join' && r.system === 'kafka-streams' && !r.error);
  if (sj && kj && sj.recordsOut < 0.95 * kj.recordsOut)
    L.push(
      `Join: Sluice wrote fewer joined records (${fmt(sj.recordsOut)} vs ${fmt(kj.recordsOut)}): it processed some clicks before the table rows of their users, which were produced first, had been read, and an inner join drops those; Kafka Streams picks records by timestamp across its two inputs, so it reads the older table rows first.`,
      '',
    );
  const missing = WORKLOADS.filter((w) => !available('sluice', w.kind)).map((w) => w.id);
  if (missing.length)
    L.push(`Not run for Sluice (its DSL has no windows or joins in this build): ${missing.join(', ')}.`, '');
  if (recs.length) {
    L.push(`## Recovery after SIGKILL (keyed count, ${fmt(recs[0]!.keys)} keys of state, exactly-once)`);
    L.push('');
    L.push(
      `The process built the state (one record per key), was SIGKILLed, ${fmt(recs[0]!.extraRecords)} more records were produced, and it was restarted on the same state dir. Times from the restart; they include waiting for the killed member to leave the group (session timeout ${SESSION_TIMEOUT_MS / 1000} s).`,
    );
    L.push('');
    L.push('| system | building the state (s) | restart → outputs resume (s) | restart → lag 0 (s) |');
    L.push('|---|---:|---:|---:|');
    for (const r of recs)
      L.push(
        `| ${r.system} | ${fmt(r.processSeconds, 1)} | ${r.error ? `failed: ${r.error}` : fmt(r.resumeSeconds, 1)} | ${fmt(r.lagZeroSeconds, 1)} |`,
      );
    L.push('');
  }
  return `${L.join('\n')}\n`;
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  if (!process.env.KAFKA_BROKERS) throw new Error('set KAFKA_BROKERS (npm run bench starts a broker)');
  if (!existsSync(PEER_JAR))
    throw new Error(`${PEER_JAR} is missing: run \`mvn -q package\` in bench/peers/kafka-streams`);
  const loadBefore = sh('uptime');
  const started = performance.now();
  const runs: RunResult[] = [];
  const recs: RecoveryResult[] = [];
  const selected = WORKLOADS.filter((w) => (o.only ? o.only.includes(w.id) : o.quick ? w.quick : true));
  if (o.only)
    for (const id of o.only)
      if (id !== 'recovery' && !WORKLOADS.some((w) => w.id === id))
        throw new Error(`--only: unknown workload ${id} (or "recovery")`);
  if (o.only) o.recovery = o.only.includes('recovery');
  const log = (s: string) => console.error(`[${((performance.now() - started) / 1000).toFixed(0)} s] ${s}`);

  const ceilingW = WORKLOADS[0]!;
  if (!o.only || o.only.includes(ceilingW.id)) {
    log('kafkajs ceiling (decode only)');
    runs.push(await runOne('kafkajs-ceiling', ceilingW, 'at_least_once', o, false));
  }
  for (const w of selected) {
    for (const system of o.systems) {
      if (!available(system, w.kind)) continue;
      log(`${w.id}: ${system} exactly_once`);
      const r = await runOne(system, w, 'exactly_once', o, w.latency || o.quick);
      runs.push(r);
      log(`  ${fmt(r.throughput)} records/s, p99 ${fmt(r.p99)} ms`);
    }
    if (o.alos && w.alos)
      for (const system of o.systems) {
        if (!available(system, w.kind)) continue;
        log(`${w.id}: ${system} at_least_once`);
        const r = await runOne(system, w, 'at_least_once', o, false);
        runs.push(r);
        log(`  ${fmt(r.throughput)} records/s`);
      }
  }
  if (o.recovery)
    for (const system of o.systems) {
      log(`recovery: ${system}, ${o.recoveryKeys} keys`);
      const r = await recovery(system, o.recoveryKeys, o);
      recs.push(r);
      log(`  resume ${fmt(r.resumeSeconds, 1)} s, lag 0 ${fmt(r.lagZeroSeconds, 1)} s`);
    }
  log('done');
  const md = report(o, runs, recs, environment(o, loadBefore));
  console.log(md);
  if (o.write) {
    const dir = join(root, 'bench/results');
    mkdirSync(dir, { recursive: true });
    const name = `${new Date().toISOString().slice(0, 10)}${o.quick ? '-quick' : ''}`;
    writeFileSync(
      join(dir, `${name}.md`),
      md.replace('## Results', `![throughput](${name}.svg)\n\n## Results`),
    );
    writeFileSync(
      join(dir, `${name}.svg`),
      svgChart(runs, `Sluice vs Kafka Streams, records/s (${name}, ${cpus().length} cores, shared)`),
    );
    console.error(`written to bench/results/${name}.md and .svg`);
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e?.stack ?? e);
    process.exit(1);
  },
);
