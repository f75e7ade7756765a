/**
 * Profiles one Sluice worker on a bench job (--job, default the keyed count), with `node --cpu-prof` and prints the
 * functions and files with the most self time (V8's sampling profiler, 1 ms interval by default).
 *
 *   npm run build && KAFKA_BROKERS=127.0.0.1:19493 node dist/bench/profile.js \
 *     [--records 200000] [--keys 100000] [--dist uniform|zipf] [--guarantee exactly_once]
 *     [--job count|map-filter|enrich|running-sum] [--out file.md] [--keep file.cpuprofile]
 *
 * The worker is stopped with SIGTERM once its group has committed the whole input, so the
 * profile covers start-up, processing and a clean shutdown; the table leaves out idle time.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../src/dev/broker-process.js';
import { createTopics, deleteTopicsMatching, uniqueName } from '../test/helpers/kafka.js';
import { summarize } from './lib/cpuprofile.js';
import { poller, produceFast } from './lib/kafka-io.js';
import { type JobKind, root, sluiceJobPath } from './lib/procs.js';
import { eventMaker } from './workloads.js';

function parseArgs(argv: string[]) {
  const o = {
    records: 200_000,
    keys: 100_000,
    dist: 'uniform' as 'uniform' | 'zipf',
    guarantee: 'exactly_once',
    out: '',
    keep: '',
    job: 'count' as JobKind,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const v = argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    if (a === '--records') o.records = Number(v);
    else if (a === '--keys') o.keys = Number(v);
    else if (a === '--dist') o.dist = v as 'uniform' | 'zipf';
    else if (a === '--guarantee') o.guarantee = v;
    else if (a === '--out') o.out = v;
    else if (a === '--keep') o.keep = v;
    else if (a === '--job') o.job = v as JobKind;
    else throw new Error(`unknown option ${a}`);
  }
  return o;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (!process.env.KAFKA_BROKERS) throw new Error('set KAFKA_BROKERS');
  const id = uniqueName('bench-prof');
  const input = `${id}-in`;
  const output = `${id}-out`;
  const stateDir = mkdtempSync(join(tmpdir(), 'sluice-prof-'));
  const profDir = mkdtempSync(join(tmpdir(), 'sluice-cpuprof-'));
  const poll = await poller();
  try {
    await createTopics([
      { topic: input, partitions: 4 },
      { topic: output, partitions: 4 },
    ]);
    await produceFast(input, o.records, eventMaker(11, { keys: o.keys, dist: o.dist }));
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SLUICE_')) env[k] = v;
    Object.assign(env, { BENCH_APP_ID: id, BENCH_INPUT: input, BENCH_OUTPUT: output });
    const t0 = performance.now();
    const child = spawn(
      process.execPath,
      [
        '--cpu-prof',
        `--cpu-prof-dir=${profDir}`,
        join(root, 'bin/sluice.js'),
        'run',
        sluiceJobPath(o.job),
        '--http-port',
        String(await freePort()),
        '--log-level',
        'warn',
        '--state-dir',
        stateDir,
        '--processing.guarantee',
        o.guarantee,
      ],
      { env, stdio: ['ignore', 'inherit', 'inherit'] },
    );
    const exited = new Promise((r) => child.once('exit', r));
    let first = 0;
    for (;;) {
      if (child.exitCode !== null) throw new Error('worker exited');
      if (!first && (await poll.high(output)) > 0) first = performance.now();
      if (first && (await poll.lag(id, [input])) === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const seconds = (performance.now() - first) / 1000;
    child.kill('SIGTERM');
    await exited;
    const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
    if (!file) throw new Error('no .cpuprofile written');
    if (o.keep) writeFileSync(o.keep, readFileSync(join(profDir, file)));
    const md = [
      `# CPU profile of a Sluice worker: ${o.job}, ${o.records} records, ${o.keys} keys ${o.dist}, ${o.guarantee}`,
      '',
      `- command: \`KAFKA_BROKERS=${process.env.KAFKA_BROKERS} node dist/bench/profile.js ${process.argv.slice(2).join(' ')}\``,
      `- ${new Date().toISOString()}; first output → input committed: ${seconds.toFixed(2)} s (${Math.round(o.records / seconds)} records/s under the profiler); start → end ${((performance.now() - t0) / 1000).toFixed(1)} s`,
      '',
      summarize(JSON.parse(readFileSync(join(profDir, file), 'utf8'))),
      '',
    ].join('\n');
    console.log(md);
    if (o.out) writeFileSync(o.out, md);
  } finally {
    await poll.close();
    rmSync(stateDir, { recursive: true, force: true });
    rmSync(profDir, { recursive: true, force: true });
    await deleteTopicsMatching(id).catch(() => undefined);
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e?.stack ?? e);
    process.exit(1);
  },
);
