/**
 * Sluice side by side with Kafka Streams, on one broker and one machine (issues 7, 14).
 *
 *   npm run bench                 # every workload, 4,000,000 records per run
 *   npm run bench -- --quick      # smoke run: 100,000 records, a few workloads
 *   npm run bench -- --only ceiling,running-sum,count-1e4-uniform   # these only
 *   npm run bench -- --only recovery --recovery-keys 100000          # the recovery test only
 *   npm run bench:latency         # the latency benchmark (bench/latency.ts)
 *
 * `npm run bench` builds (tsc), builds the Kafka Streams peer (`mvn -q package` in
 * bench/peers/kafka-streams), then runs this file. It uses KAFKA_BROKERS when set, otherwise it
 * starts a local Kafka 4.4.0 on --kafka-port (default 19494, and 19495 for its controller) and stops it at the end.
 *
 * For every workload, system and guarantee, one fresh process on fresh topics (4 partitions):
 *  1. N records (--records, default 4,000,000) are produced before the process starts
 *     (deterministic, bench/workloads.ts).
 *  2. Equal work: both systems write the same outputs. The record caches of both (Kafka Streams'
 *     statestore.cache.max.bytes, Sluice's state.recordCacheMaxBytes) get the same bound, 0 (every
 *     update an output) on every workload today; it is a per-workload setting (bench/lib/throughput.ts). The committed outputs are counted
 *     after each run and compared across the systems (and with the expected count where the
 *     workload has one); a difference is flagged at the top of the report.
 *  3. Headline rate = records/s between 10 % and 90 % of the input committed (the group's
 *     committed offsets sampled every 100 ms, interpolated); second column N / (last − first
 *     output). CPU s per million records = CPU (utime + stime, /proc/<pid>/stat) from "ready"
 *     (group joined) to the end, per million input records. Peak RSS = VmHWM at the end.
 *  4. Ceilings: plain group consumers that only decode the running sum's input (kafkajs on this
 *     Node and on Node 24, @platformatic/kafka on Node 24; bench/lib/ceilings.ts).
 *  5. Recovery: a keyed count over K distinct keys (1e6 in the full run) is processed, the process
 *     is SIGKILLed, 20k more records arrive, the process is restarted on the same state dir:
 *     time until outputs resume and until the group's lag is back to 0.
 * Latency is bench/latency.ts (fixed input rates at fractions of Sluice's capacity).
 */
import { execFileSync, execSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, freemem, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createTopics, uniqueName } from '../test/helpers/kafka.js';
import { ceilings } from './lib/ceilings.js';
import { endOffsets, observe, poller, produceFast } from './lib/kafka-io.js';
import {
  COMMIT_INTERVAL_MS,
  type JobKind,
  PEER_JAR,
  type Proc,
  root,
  SESSION_TIMEOUT_MS,
  type SystemName,
  sluiceJobPath,
  startProc,
} from './lib/procs.js';
import { benchCommand, fmt, type RecoveryResult, type RunResult, svgChart } from './lib/report.js';
import { outputsCheck } from './lib/steady.js';
import { cleanUp, runCeilings, runOne, short, sleep, WORKLOADS } from './lib/throughput.js';
import { eventMaker } from './workloads.js';

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  quick: boolean;
  records: number;
  partitions: number;
  recoveryKeys: number;
  recovery: boolean;
  ceilings: boolean;
  alos: boolean;
  only: string[] | undefined;
  systems: Array<'sluice' | 'kafka-streams'>;
  write: boolean;
  runTimeoutS: number;
  name: string | undefined;
  /** Stream threads of each system's one process (equal on both sides) */
  threads: number;
}

function parseOptions(argv: string[]): Options {
  const quick = argv.includes('--quick');
  const o: Options = {
    quick,
    // 4M: at 1M Kafka Streams' fastest runs (stateless, ~3 s) were mostly its JIT warming up, and it
    // ran 1.2-1.5x faster once warm (bench/results/scaling-2026-12-07.md).
    records: quick ? 100_000 : 4_000_000,
    partitions: 4,
    recoveryKeys: quick ? 100_000 : 1_000_000,
    recovery: !quick,
    ceilings: true,
    alos: !quick,
    only: undefined,
    systems: ['sluice', 'kafka-streams'],
    write: true,
    runTimeoutS: 900,
    name: undefined,
    threads: 1,
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
      case '--no-ceilings':
        o.ceilings = false;
        break;
      case '--no-alos':
        o.alos = false;
        break;
      case '--alos':
        o.alos = true;
        break;
      case '--only':
        o.only = next().split(',');
        break;
      case '--systems':
        o.systems = next().split(',') as Options['systems'];
        for (const s of o.systems)
          if (s !== 'sluice' && s !== 'kafka-streams') throw new Error(`--systems: unknown system ${s}`);
        break;
      case '--run-timeout-s':
        o.runTimeoutS = num();
        break;
      case '--name':
        o.name = next();
        break;
      case '--threads':
        o.threads = num();
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

/** Sluice jobs for windows and joins exist only once the DSL has them (issue 4). */
function available(system: SystemName, kind: JobKind): boolean {
  return system !== 'sluice' || existsSync(sluiceJobPath(kind));
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
    `- command: \`${benchCommand('bench')}\``,
    `- date: ${new Date().toISOString()}; git ${sh(`git -C ${root} rev-parse --short HEAD`)}${sh(`git -C ${root} status --porcelain -- src`) ? ' (src modified)' : ''}`,
    `- machine: ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), ${fmt(totalmem() / 2 ** 30, 1)} GiB RAM (${fmt(freemem() / 2 ** 30, 1)} free), ${process.platform}/${process.arch}; shared with other jobs`,
    `- load (uptime) before: ${loadBefore}; after: ${sh('uptime')}`,
    `- broker: ${process.env.BENCH_BROKER_DESC ?? process.env.KAFKA_BROKERS} (one broker, same for all systems)`,
    `- Sluice ${pkg.version}: node ${process.version}, kafkajs ${kjs.version}, one worker process${o.threads > 1 ? ` with processing.threads=${o.threads}` : ''}`,
    `- Kafka Streams ${ksVersion}: ${sh('java -version 2>&1 | head -1') || java}, -Xms256m -Xmx1g -XX:+UseParallelGC, num.stream.threads=${o.threads}, RocksDB stores, record cache as in the "KS cache" column (off = statestore.cache.max.bytes 0: every update is an output, as in Sluice)`,
    `- both: commit interval ${COMMIT_INTERVAL_MS} ms, session timeout ${SESSION_TIMEOUT_MS / 1000} s, ${o.partitions} partitions per topic, input keyed by user, JSON values of 140–160 bytes`,
    `- ${fmt(o.records)} input records per throughput run`,
  ];
}

/** The outputs checks of every workload × guarantee that more than one system ran. */
function checks(runs: RunResult[]): Map<string, { ok: boolean; message: string }> {
  const out = new Map<string, { ok: boolean; message: string }>();
  for (const r of runs) {
    if (r.system.startsWith('ceiling')) continue;
    const key = `${r.workload} ${r.guarantee}`;
    if (out.has(key)) continue;
    const same = runs.filter((x) => x.workload === r.workload && x.guarantee === r.guarantee && !x.error);
    const w = WORKLOADS.find((x) => x.id === r.workload);
    out.set(key, outputsCheck(same, w?.expectedOut?.(r.records)));
  }
  return out;
}

function report(o: Options, runs: RunResult[], recs: RecoveryResult[], env: string[]): string {
  const L: string[] = [];
  L.push(
    `# Sluice vs Kafka Streams${o.quick ? ' (quick smoke run)' : ''} — ${new Date().toISOString().slice(0, 10)}`,
  );
  L.push('');
  L.push(...env);
  L.push('');
  const ck = checks(runs);
  const bad = [...ck].filter(([, c]) => !c.ok);
  if (bad.length) {
    L.push('> **⚠ OUTPUT COUNTS DIFFER: these rows did not do equal work.**');
    for (const [k, c] of bad) L.push(`> - ${k}: ${c.message}`);
    L.push('');
  }
  L.push('## Results');
  L.push('');
  L.push(
    'Headline = records/s between 10 % and 90 % of the input committed (the group\'s committed offsets sampled every 100 ms, times interpolated). "First → last output" = input records / (last − first output seen in the output topic\'s high-water mark). Records out = committed output records, counted by a read_committed reader after the run (no transaction markers); "outputs" says whether both systems wrote the same number (and the expected one, where the workload has one). CPU = utime + stime of the process from ready (group joined) to the end, per million input records. The ceilings decode the running sum\'s input and write nothing: their rate is between 10 % and 90 % of the records decoded. The machine is shared: repeat runs differ by ±20 % or more.',
  );
  L.push('');
  L.push(
    '| workload | system | guarantee | KS cache | records in | records out | outputs | records/s (10 → 90 % committed) | records/s (first → last output) | start → first output (s) | CPU s / M records | peak RSS (MB) |',
  );
  L.push('|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|');
  for (const r of runs) {
    const c = ck.get(`${r.workload} ${r.guarantee}`);
    const okCell = r.system.startsWith('ceiling') ? '—' : c?.ok ? 'equal' : '**MISMATCH**';
    L.push(
      `| ${r.workload} | ${r.system} | ${r.guarantee} | ${r.ksCache} | ${fmt(r.records)} | ${fmt(r.recordsOut)} | ${okCell} | ${r.error ? `failed: ${r.error}` : fmt(r.steadyThroughput)} | ${fmt(r.throughput)} | ${fmt(r.startSeconds, 1)} | ${fmt(r.cpuPerMillion, 1)} | ${fmt(r.hwmBytes / 2 ** 20)} |`,
    );
  }
  L.push('');
  L.push('## Ratio Sluice / Kafka Streams (same workload and guarantee)');
  L.push('');
  L.push(
    '| workload | guarantee | records out (Sluice / KS) | throughput (10 → 90 % committed) | throughput (first → last output) | CPU per record | peak RSS |',
  );
  L.push('|---|---|---|---:|---:|---:|---:|');
  for (const s of runs.filter((r) => r.system === 'sluice')) {
    const k = runs.find(
      (r) => r.system === 'kafka-streams' && r.workload === s.workload && r.guarantee === s.guarantee,
    );
    if (!k) continue;
    const q = (a?: number, b?: number) =>
      a !== undefined && b !== undefined && Number.isFinite(a) && b > 0 ? fmt(a / b, 2) : '—';
    const outs = `${fmt(s.recordsOut)} / ${fmt(k.recordsOut)}${s.recordsOut === k.recordsOut ? '' : ' **MISMATCH**'}`;
    L.push(
      `| ${s.workload} | ${s.guarantee} | ${outs} | ${q(s.steadyThroughput, k.steadyThroughput)} | ${q(s.throughput, k.throughput)} | ${q(s.cpuPerMillion, k.cpuPerMillion)} | ${q(s.hwmBytes, k.hwmBytes)} |`,
    );
  }
  L.push('');
  L.push('Above 1 is better for Sluice in the throughput columns, below 1 in the others.', '');
  if (bad.some(([k]) => k.startsWith('join ')))
    L.push(
      'Join: an inner stream-table join drops a click whose user row has not been read yet. Kafka Streams picks records by timestamp across its two inputs, so it reads the table rows (produced first) before the clicks; Sluice may process clicks before their rows, so it writes fewer joined records: not equal work, and its row is not comparable.',
      '',
    );
  const missing = WORKLOADS.filter((w) => !available('sluice', w.kind)).map((w) => w.id);
  if (missing.length)
    L.push(`Not run for Sluice (its DSL has no job for them in this build): ${missing.join(', ')}.`, '');
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
  if (o.systems.includes('kafka-streams') && !existsSync(PEER_JAR))
    throw new Error(`${PEER_JAR} is missing: run \`mvn -q package\` in bench/peers/kafka-streams`);
  const loadBefore = sh('uptime');
  const started = performance.now();
  const runs: RunResult[] = [];
  const recs: RecoveryResult[] = [];
  if (o.only)
    for (const id of o.only)
      if (id !== 'recovery' && id !== 'ceiling' && !WORKLOADS.some((w) => w.id === id))
        throw new Error(`--only: unknown workload ${id} (or "ceiling", "recovery")`);
  const selected = WORKLOADS.filter((w) => (o.only ? o.only.includes(w.id) : o.quick ? w.quick : true));
  if (o.only) {
    o.recovery = o.only.includes('recovery');
    o.ceilings = o.only.includes('ceiling');
  }
  const log = (s: string) => console.error(`[${((performance.now() - started) / 1000).toFixed(0)} s] ${s}`);
  const ro = { records: o.records, partitions: o.partitions, runTimeoutS: o.runTimeoutS, threads: o.threads };

  if (o.ceilings) runs.push(...(await runCeilings(ceilings(), ro, log)));
  for (const w of selected) {
    const guarantees =
      o.alos && w.alos ? (['exactly_once', 'at_least_once'] as const) : (['exactly_once'] as const);
    for (const g of guarantees)
      for (const system of o.systems) {
        if (!available(system, w.kind)) continue;
        log(`${w.id}: ${system} ${g}`);
        const r = await runOne(system, w, g, ro);
        runs.push(r);
        log(`  ${fmt(r.steadyThroughput)} records/s (10 → 90 %), ${fmt(r.recordsOut)} out`);
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
    const name = o.name ?? `${new Date().toISOString().slice(0, 10)}${o.quick ? '-quick' : ''}`;
    writeFileSync(
      join(dir, `${name}.md`),
      md.replace('## Results', `![throughput](${name}.svg)\n\n## Results`),
    );
    writeFileSync(
      join(dir, `${name}.svg`),
      svgChart(
        runs,
        `Sluice vs Kafka Streams, records/s, 10 → 90 % committed (${name}, ${cpus().length} cores, shared)`,
      ),
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
