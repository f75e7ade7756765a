/**
 * How the rate of one app grows with its parallelism on this machine (issue 14): N Sluice worker
 * processes of one app (one group), against one Kafka Streams process with N stream threads. A
 * Sluice worker runs its tasks on one thread, so N processes are what N worker threads in one
 * process could reach at most; Kafka Streams' `num.stream.threads` is its own way to use more
 * cores. The bench's other tables compare one Sluice worker with one stream thread.
 *
 *   npm run build && KAFKA_BROKERS=127.0.0.1:9092 node dist/bench/scaling.js \
 *     [--workload running-sum] [--guarantee at_least_once] [--records 4000000] \
 *     [--parallelism 1,2] [--systems sluice,sluice-threads,kafka-streams] [--runs 2]
 *
 * Each run gets new topics (4 partitions) and the input is written first. The processes then
 * start together, and the rate is taken between 50 % and 90 % of the input committed, when all
 * of them have long joined (the report marks a run where one was not ready by 50 %): the first
 * one up takes every partition until the others join. Settings as in bench/run.ts: commit
 * interval 100 ms, record caches off. Outputs are not counted here (bench/run.ts does that).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTopics, deleteTopicsMatching, uniqueName } from '../test/helpers/kafka.js';
import { poller, produceFast } from './lib/kafka-io.js';
import { type Guarantee, type Proc, type SystemName, startProc } from './lib/procs.js';
import { type CommitSample, steadyRate, timeAt } from './lib/steady.js';
import { seedOf, sleep, WORKLOADS } from './lib/throughput.js';
import { eventMaker } from './workloads.js';

/** `sluice`: N worker processes; `sluice-threads`: one process with N stream threads. */
type Mode = 'sluice' | 'sluice-threads' | 'kafka-streams';

interface Options {
  workload: string;
  guarantee: Guarantee;
  records: number;
  parallelism: number[];
  systems: Array<Mode>;
  runs: number;
}

function parseArgs(argv: string[]): Options {
  const o: Options = {
    workload: 'running-sum',
    guarantee: 'at_least_once',
    records: 4_000_000,
    parallelism: [1, 2],
    systems: ['sluice', 'sluice-threads', 'kafka-streams'],
    runs: 2,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const v = argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    if (a === '--workload') o.workload = v;
    else if (a === '--guarantee') o.guarantee = v as Guarantee;
    else if (a === '--records') o.records = Number(v);
    else if (a === '--parallelism') o.parallelism = v.split(',').map(Number);
    else if (a === '--systems') o.systems = v.split(',') as Mode[];
    else if (a === '--runs') o.runs = Number(v);
    else throw new Error(`unknown option ${a}`);
  }
  if (!(o.records > 0) || !(o.runs > 0) || !o.parallelism.every((n) => Number.isInteger(n) && n > 0))
    throw new Error('--records, --runs and --parallelism take positive whole numbers');
  for (const x of o.systems)
    if (x !== 'sluice' && x !== 'sluice-threads' && x !== 'kafka-streams')
      throw new Error(`--systems: sluice, sluice-threads or kafka-streams, not ${x}`);
  return o;
}

interface Row {
  system: Mode;
  n: number;
  run: number;
  rate: number;
  /** every process was ready before 50 % was committed */
  readyFirst: boolean;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (!process.env.KAFKA_BROKERS) throw new Error('set KAFKA_BROKERS');
  const w = WORKLOADS.find((x) => x.id === o.workload);
  if (!w || w.table || w.eventTime)
    throw new Error(`workload ${o.workload}: one without a table or event time`);
  const rows: Row[] = [];
  const make = eventMaker(seedOf(w.id), w.dist);
  for (let run = 1; run <= o.runs; run++) {
    for (const n of o.parallelism) {
      for (const mode of o.systems) {
        const system: SystemName = mode === 'kafka-streams' ? 'kafka-streams' : 'sluice';
        // A poller per run: kafkajs's metadata refresh fails for good once a topic it knew is deleted.
        const poll = await poller();
        const id = uniqueName(
          `bench-scale-${mode === 'sluice' ? 's' : mode === 'sluice-threads' ? 't' : 'k'}${n}`,
        );
        const input = `${id}-in`;
        const output = `${id}-out`;
        const dirs: string[] = [];
        const procs: Proc[] = [];
        try {
          await createTopics([
            { topic: input, partitions: 4 },
            { topic: output, partitions: 4 },
          ]);
          await poll.waitFor([input, output]);
          await produceFast(input, o.records, make);
          const count = mode === 'sluice' ? n : 1;
          for (let i = 0; i < count; i++) {
            const stateDir = mkdtempSync(join(tmpdir(), 'sluice-scale-'));
            dirs.push(stateDir);
            procs.push(
              await startProc({
                system,
                kind: w.kind,
                appId: id,
                input,
                output,
                guarantee: o.guarantee,
                stateDir,
                brokers: process.env.KAFKA_BROKERS!,
                ksCacheBytes: w.ksCacheBytes,
                threads: mode === 'sluice' ? 1 : n,
              }),
            );
          }
          let readyAt = Number.POSITIVE_INFINITY;
          void Promise.all(procs.map((p) => p.ready(120_000))).then(
            () => {
              readyAt = performance.now();
            },
            () => undefined,
          );
          const samples: CommitSample[] = [];
          const t0 = performance.now();
          for (;;) {
            for (const p of procs)
              if (p.child.exitCode !== null || p.child.signalCode !== null)
                throw new Error(`a process exited early:\n${p.logs.slice(-20).join('\n')}`);
            if (performance.now() - t0 > 600_000) throw new Error('timed out (600 s)');
            const before = performance.now();
            const committed = await poll.committed(id, [input]);
            if (committed >= 0) samples.push({ at: (before + performance.now()) / 2, committed });
            if (committed >= o.records) break;
            await sleep(Math.max(0, 100 - (performance.now() - before)));
          }
          const rate = steadyRate(samples, o.records, 0.5, 0.9);
          rows.push({ system: mode, n, run, rate, readyFirst: readyAt <= timeAt(samples, o.records / 2) });
          console.error(`run ${run} ${mode} ×${n}: ${Math.round(rate)} records/s`);
        } finally {
          await Promise.all(procs.map((p) => p.kill('SIGKILL')));
          for (const d of dirs) rmSync(d, { recursive: true, force: true });
          await poll.close();
          await deleteTopicsMatching(id).catch(() => undefined);
        }
      }
    }
  }
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    const m = s.length >> 1;
    return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
  };
  const L = [
    `# Scaling: ${o.workload}, ${o.guarantee}, ${o.records} records, 4 partitions`,
    '',
    `- command: \`KAFKA_BROKERS=${process.env.KAFKA_BROKERS} node dist/bench/scaling.js ${process.argv.slice(2).join(' ')}\``,
    `- ${new Date().toISOString()}; rate = records/s between 50 % and 90 % of the input committed`,
    '- parallelism N: `sluice`, N worker processes of one app; `sluice-threads`, one Sluice process with N stream threads (`processing.threads`); `kafka-streams`, one process with N stream threads (`num.stream.threads`)',
    '',
    `| system | N | rate per run (records/s) | median | vs N = ${o.parallelism[0]} |`,
    '|---|---:|---|---:|---:|',
  ];
  for (const system of o.systems) {
    const one = median(
      rows.filter((r) => r.system === system && r.n === o.parallelism[0]).map((r) => r.rate),
    );
    for (const n of o.parallelism) {
      const rs = rows.filter((r) => r.system === system && r.n === n);
      const m = median(rs.map((r) => r.rate));
      const runs = rs.map((r) => `${Math.round(r.rate).toLocaleString('en-US')}${r.readyFirst ? '' : '*'}`);
      L.push(
        `| ${system} | ${n} | ${runs.join(', ')} | ${Math.round(m).toLocaleString('en-US')} | ${(m / one).toFixed(2)} |`,
      );
    }
  }
  L.push('', '\\* a process was not ready yet when half of the input was committed.');
  console.log(L.join('\n'));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
