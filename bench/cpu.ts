/**
 * CPU per million records of a Sluice worker alone on one workload of bench/run.ts (issue 14):
 * the input is produced once, then the worker runs --runs times on it (each run a new app id, so
 * a new group reading from the start, new state and changelogs). With --base <checkout> (another
 * worktree, built) its worker alternates with this one, A B A B …, and the CPU ratio is taken
 * pair by pair, so a change is compared under the same load on a shared machine. With --profile
 * one more run of this checkout goes under `node --cpu-prof` and its table is printed.
 *
 *   npm run build && KAFKA_BROKERS=127.0.0.1:9092 node dist/bench/cpu.js \
 *     [--workload running-sum] [--records 1000000] [--guarantee exactly_once] [--runs 3] \
 *     [--base ../other-worktree] [--profile out.md] [--keep file.cpuprofile] \
 *     [--node-args '--max-semi-space-size=64']   # this checkout's worker only \
 *     [--profile-build base]                      # profile the --base checkout instead
 *
 * CPU is the worker's utime + stime (/proc/<pid>/stat, every thread; and of its main thread alone,
 * which bounds the rate: /proc/<pid>/task/<pid>/stat) from ready (/readyz 200) to
 * the input all committed, per million input records, as in bench/run.ts; the rate is the one
 * between 10 % and 90 % committed. Same settings as bench/run.ts: commit interval 100 ms, record
 * cache bound 0, 4 partitions.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { deleteTopicsMatching, uniqueName } from '../test/helpers/kafka.js';
import { summarize } from './lib/cpuprofile.js';
import { poller } from './lib/kafka-io.js';
import { type Guarantee, mainThreadSeconds, procStats, startProc } from './lib/procs.js';
import { type CommitSample, percentile, steadyRate } from './lib/steady.js';
import { prepare, sleep, WORKLOADS } from './lib/throughput.js';

interface Options {
  workload: string;
  records: number;
  guarantee: Guarantee;
  runs: number;
  base: string;
  profile: string;
  /** which build the --profile run is of: this (default) or base */
  profileBuild: 'this' | 'base';
  keep: string;
  /** node options of this checkout's worker only (e.g. --max-semi-space-size=64) */
  nodeArgs: string[];
}

function parseArgs(argv: string[]): Options {
  const o: Options = {
    workload: 'running-sum',
    records: 1_000_000,
    guarantee: 'exactly_once',
    runs: 3,
    base: '',
    profile: '',
    profileBuild: 'this',
    keep: '',
    nodeArgs: [],
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const v = argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    if (a === '--workload') o.workload = v;
    else if (a === '--records') o.records = Number(v);
    else if (a === '--guarantee') o.guarantee = v as Guarantee;
    else if (a === '--runs') o.runs = Number(v);
    else if (a === '--base') o.base = resolve(v);
    else if (a === '--profile') o.profile = v;
    else if (a === '--profile-build') o.profileBuild = v as Run['build'];
    else if (a === '--keep') o.keep = v;
    else if (a === '--node-args') o.nodeArgs = v.split(' ').filter(Boolean);
    else throw new Error(`unknown option ${a}`);
  }
  return o;
}

interface Run {
  build: 'this' | 'base';
  cpuPerMillion: number;
  /** the main (JavaScript) thread alone, per million input records */
  mainPerMillion: number;
  rate: number;
  rssMb: number;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (!process.env.KAFKA_BROKERS) throw new Error('set KAFKA_BROKERS');
  const w = WORKLOADS.find((x) => x.id === o.workload);
  if (!w) throw new Error(`no workload ${o.workload} (${WORKLOADS.map((x) => x.id).join(', ')})`);
  const id = uniqueName(`bench-cpu-${w.id}`);
  const poll = await poller();
  const runs: Run[] = [];
  let profileMd = '';
  try {
    const t = await prepare(w, id, o.records, 4, poll);
    const inputs = t.table ? [t.input, t.table] : [t.input];
    const total = o.records + (w.table ?? 0);
    const once = async (build: Run['build'], n: number, profDir?: string): Promise<Run> => {
      const appId = `${id}-${build}${n}`;
      const stateDir = mkdtempSync(join(tmpdir(), 'sluice-cpu-'));
      const proc = await startProc({
        system: 'sluice',
        kind: w.kind,
        appId,
        input: t.input,
        output: t.output,
        table: t.table,
        guarantee: o.guarantee,
        stateDir,
        brokers: process.env.KAFKA_BROKERS!,
        ksCacheBytes: w.ksCacheBytes,
        ...(build === 'base' ? { sluiceRoot: o.base } : {}),
        nodeArgs: [
          ...(build === 'this' ? o.nodeArgs : []),
          ...(profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []),
        ],
      });
      try {
        await proc.ready(120_000);
        const cpu0 = procStats(proc.pid).cpuSeconds;
        const main0 = mainThreadSeconds(proc.pid);
        const t0 = performance.now();
        const samples: CommitSample[] = [{ at: t0, committed: 0 }];
        for (;;) {
          if (proc.child.exitCode !== null || proc.child.signalCode !== null)
            throw new Error(`exited early:\n${proc.logs.slice(-20).join('\n')}`);
          if (performance.now() - t0 > 600_000) throw new Error('timed out (600 s)');
          const before = performance.now();
          const committed = await poll.committed(appId, inputs);
          if (committed >= 0) samples.push({ at: (before + performance.now()) / 2, committed });
          if (committed >= total) break;
          await sleep(Math.max(0, 100 - (performance.now() - before)));
        }
        const st = procStats(proc.pid);
        return {
          build,
          cpuPerMillion: ((st.cpuSeconds - cpu0) / o.records) * 1e6,
          mainPerMillion: ((mainThreadSeconds(proc.pid) - main0) / o.records) * 1e6,
          rate: steadyRate(samples, total),
          rssMb: st.hwmBytes / 2 ** 20,
        };
      } finally {
        // SIGTERM under the profiler: the profile is written at a clean exit.
        await proc.kill(profDir ? 'SIGTERM' : 'SIGKILL');
        rmSync(stateDir, { recursive: true, force: true });
      }
    };
    for (let i = 0; i < o.runs; i++) {
      for (const build of o.base ? (['this', 'base'] as const) : (['this'] as const)) {
        const r = await once(build, i);
        runs.push(r);
        console.error(
          `run ${i + 1} ${build}: ${r.cpuPerMillion.toFixed(2)} CPU s/M, ${Math.round(r.rate)} records/s, ${Math.round(r.rssMb)} MB`,
        );
      }
    }
    if (o.profile) {
      const profDir = mkdtempSync(join(tmpdir(), 'sluice-cpuprof-'));
      try {
        const r = await once(o.profileBuild, o.runs, profDir);
        const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
        if (!file) throw new Error('no .cpuprofile written');
        if (o.keep) writeFileSync(o.keep, readFileSync(join(profDir, file)));
        profileMd = [
          `## CPU profile (${o.profileBuild === 'this' ? 'this checkout' : o.base}, under the profiler: ${r.cpuPerMillion.toFixed(2)} CPU s/M, ${Math.round(r.rate)} records/s)`,
          '',
          summarize(JSON.parse(readFileSync(join(profDir, file), 'utf8'))),
        ].join('\n');
      } finally {
        rmSync(profDir, { recursive: true, force: true });
      }
    }
  } finally {
    await poll.close();
    await deleteTopicsMatching(id).catch(() => undefined);
  }
  const med = (b: Run['build'], f: (r: Run) => number) =>
    percentile(runs.filter((r) => r.build === b).map(f), 50);
  const L: string[] = [
    `# Sluice alone: ${w.id}, ${o.records} records, ${o.guarantee}`,
    '',
    `- command: \`KAFKA_BROKERS=${process.env.KAFKA_BROKERS} node dist/bench/cpu.js ${process.argv.slice(2).join(' ')}\``,
    `- ${new Date().toISOString()}; CPU = worker utime + stime from ready to the input all committed`,
    '',
    '| run | build | CPU s / M records | main thread CPU s / M | records/s (10 → 90 % committed) | peak RSS (MB) |',
    '|---:|---|---:|---:|---:|---:|',
    ...runs.map(
      (r, i) =>
        `| ${Math.floor(i / (o.base ? 2 : 1)) + 1} | ${r.build} | ${r.cpuPerMillion.toFixed(2)} | ${r.mainPerMillion.toFixed(2)} | ${Math.round(r.rate)} | ${Math.round(r.rssMb)} |`,
    ),
    '',
    `median this: ${med('this', (r) => r.cpuPerMillion).toFixed(2)} CPU s/M, ${Math.round(med('this', (r) => r.rate))} records/s`,
  ];
  if (o.base) {
    const pairs = runs
      .filter((r) => r.build === 'this')
      .map((a, i) => {
        const b = runs.filter((r) => r.build === 'base')[i]!;
        return {
          cpu: a.cpuPerMillion / b.cpuPerMillion,
          main: a.mainPerMillion / b.mainPerMillion,
          rate: a.rate / b.rate,
        };
      });
    L.push(
      `median base: ${med('base', (r) => r.cpuPerMillion).toFixed(2)} CPU s/M, ${Math.round(med('base', (r) => r.rate))} records/s`,
      `this / base, pair by pair: CPU ${pairs.map((p) => p.cpu.toFixed(2)).join(', ')} (median ${percentile(
        pairs.map((p) => p.cpu),
        50,
      ).toFixed(2)}); main thread CPU ${pairs.map((p) => p.main.toFixed(2)).join(', ')} (median ${percentile(
        pairs.map((p) => p.main),
        50,
      ).toFixed(2)}); rate ${pairs.map((p) => p.rate.toFixed(2)).join(', ')} (median ${percentile(
        pairs.map((p) => p.rate),
        50,
      ).toFixed(2)})`,
    );
  }
  if (profileMd) L.push('', profileMd);
  console.log(L.join('\n'));
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e?.stack ?? e);
    process.exit(1);
  },
);
