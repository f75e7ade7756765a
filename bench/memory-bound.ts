/**
 * Memory bounds of one worker (issue 8, item 3), RSS measured from /proc/<pid>/status.
 *
 *  --mode keys (default): K distinct keys (default 10,000,000, one record each) through the
 *     running-sum job with a small `state.cacheMaxBytes` (default 8 MiB). Input is produced while
 *     the worker runs. The write-back cache must stay at its bound however many keys pass, so RSS
 *     must level off instead of growing with the number of keys.
 *  --mode slow: an overloaded worker. The slow-sum job (TEST_SLOW_US of CPU per record, default
 *     500 µs, i.e. ≤ ~2,000 records/s) is offered --rate records/s (default 8,000) for --minutes
 *     (default 4): its lag grows all the time, its RSS must not.
 *
 *   npx tsc -p . && KAFKA_BROKERS=127.0.0.1:19792 node dist/bench/memory-bound.js
 *     [--mode keys|slow] [--keys N] [--cache-bytes B] [--minutes M] [--rate R] [--slow-us U]
 *     [--partitions P] [--no-write]
 *
 * Results (samples of RSS, heap, cache bytes and progress, and the verdict) are printed and
 * appended to bench/results/memory-<YYYY-MM-DD>.md.
 */
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brokers, createTopics, deleteTopicsMatching, testKafka, uniqueName } from '../test/helpers/kafka.js';
import { metricSum, spawnWorker, type WorkerProcess } from '../test/helpers/workers.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

interface Options {
  mode: 'keys' | 'slow';
  keys: number;
  cacheBytes: number;
  minutes: number;
  rate: number;
  slowUs: number;
  partitions: number;
  write: boolean;
}

function parseOptions(argv: string[]): Options {
  const o: Options = {
    mode: 'keys',
    keys: 10_000_000,
    cacheBytes: 8 * 1024 * 1024,
    minutes: 4,
    rate: 8000,
    slowUs: 500,
    partitions: 4,
    write: true,
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const num = () => {
      const v = Number(argv[++i]);
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${flag} expects a positive number`);
      return v;
    };
    switch (flag) {
      case '--mode': {
        const m = argv[++i];
        if (m !== 'keys' && m !== 'slow') throw new Error('--mode is keys or slow');
        o.mode = m;
        break;
      }
      case '--keys':
        o.keys = Math.floor(num());
        break;
      case '--cache-bytes':
        o.cacheBytes = Math.floor(num());
        break;
      case '--minutes':
        o.minutes = num();
        break;
      case '--rate':
        o.rate = num();
        break;
      case '--slow-us':
        o.slowUs = num();
        break;
      case '--partitions':
        o.partitions = Math.floor(num());
        break;
      case '--no-write':
        o.write = false;
        break;
      default:
        throw new Error(`unknown option ${flag}`);
    }
  }
  return o;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resident set size of a process in bytes (VmRSS), or undefined once it is gone. */
function rssOf(pid: number): number | undefined {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

interface Sample {
  s: number;
  rss: number;
  heap: number;
  cache: number;
  in: number;
  out: number;
  lag: number;
}

const MB = 1024 * 1024;
const fmtMb = (b: number) => (b / MB).toFixed(1);

/** Produces `n` records (key k<i>, one per distinct key, or cycled over `keySpace`), paced if `rate`. */
async function produceStream(
  topic: string,
  opts: { n: number; keySpace?: number; rate?: number; stop?: () => boolean },
): Promise<number> {
  const p = testKafka().producer({ allowAutoTopicCreation: false });
  await p.connect();
  const BATCH = opts.rate ? Math.max(100, Math.floor(opts.rate / 10)) : 10_000;
  const started = Date.now();
  let sent = 0;
  try {
    const inflight: Promise<unknown>[] = [];
    for (let i = 0; i < opts.n && !opts.stop?.(); i += BATCH) {
      const messages = [];
      for (let j = i; j < Math.min(opts.n, i + BATCH); j++) {
        const k = `k${opts.keySpace ? j % opts.keySpace : j}`;
        messages.push({ key: k, value: `{"k":"${k}","v":1,"seq":${j}}` });
      }
      inflight.push(p.send({ topic, acks: -1, messages }));
      sent += messages.length;
      if (inflight.length >= 4) await inflight.shift();
      if (opts.rate) {
        const due = started + (sent / opts.rate) * 1000;
        if (due > Date.now()) await sleep(due - Date.now());
      }
    }
    await Promise.all(inflight);
  } finally {
    await p.disconnect();
  }
  return sent;
}

async function sample(
  w: WorkerProcess,
  t0: number,
  input: string,
  output: string,
): Promise<Sample | undefined> {
  const rss = rssOf(w.child.pid!);
  if (rss === undefined) return undefined;
  // A scrape can time out on a loaded machine: NaN prints as '—' (RSS is read from /proc anyway).
  const text = await w.metrics().catch(() => '');
  if (text === '') return { s: (Date.now() - t0) / 1000, rss, heap: NaN, cache: NaN, in: NaN, out: NaN, lag: NaN };
  return {
    s: (Date.now() - t0) / 1000,
    rss,
    heap: metricSum(text, 'sluice_node_nodejs_heap_size_used_bytes'),
    cache: metricSum(text, 'sluice_state_cache_bytes'),
    in: metricSum(text, 'sluice_records_in_total', { topic: input }),
    out: metricSum(text, 'sluice_records_out_total', { topic: output }),
    lag: metricSum(text, 'sluice_consumer_lag', { topic: input }),
  };
}

function table(samples: Sample[], rows: number): string {
  const pick: Sample[] = [];
  const step = Math.max(1, Math.floor(samples.length / rows));
  for (let i = 0; i < samples.length; i += step) pick.push(samples[i]!);
  if (pick[pick.length - 1] !== samples[samples.length - 1]) pick.push(samples[samples.length - 1]!);
  const lines = [
    '| t (s) | input records processed | output records committed | input lag | RSS (MiB) | heap used (MiB) | cache (MiB, sum of tasks) |',
    '|---:|---:|---:|---:|---:|---:|---:|',
  ];
  const n = (v: number) => (Number.isNaN(v) ? '—' : v.toLocaleString('en'));
  const mb = (v: number) => (Number.isNaN(v) ? '—' : fmtMb(v));
  for (const x of pick)
    lines.push(
      `| ${x.s.toFixed(0)} | ${n(x.in)} | ${n(x.out)} | ${n(x.lag)} | ${fmtMb(x.rss)} | ${mb(x.heap)} | ${mb(x.cache)} |`,
    );
  return lines.join('\n');
}

/** Max RSS over each half of the run: bounded memory levels off, so the second half is not higher. */
function verdict(samples: Sample[]): { text: string; firstMax: number; secondMax: number } {
  const half = Math.floor(samples.length / 2);
  const firstMax = Math.max(...samples.slice(0, half).map((x) => x.rss));
  const secondMax = Math.max(...samples.slice(half).map((x) => x.rss));
  const growth = (secondMax - firstMax) / firstMax;
  const ok = growth <= 0.1;
  return {
    firstMax,
    secondMax,
    text: `max RSS first half ${fmtMb(firstMax)} MiB, second half ${fmtMb(secondMax)} MiB (${(growth * 100).toFixed(1)} %): ${ok ? 'flat (≤ +10 %)' : 'GROWING (> +10 %)'}`,
  };
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const id = uniqueName(o.mode === 'keys' ? 'bench-mem' : 'bench-slow');
  const input = `${id}-in`;
  const output = `${id}-out`;
  await createTopics([
    { topic: input, partitions: o.partitions },
    { topic: output, partitions: o.partitions },
  ]);
  const stateDir = mkdtempSync(join(tmpdir(), 'sluice-bench-mem-'));
  const job = o.mode === 'keys' ? 'running-sum' : 'slow-sum';
  const worker = spawnWorker(job, {
    name: 'w',
    stateDir,
    env: { TEST_APP_ID: id, TEST_INPUT: input, TEST_OUTPUT: output, TEST_SLOW_US: String(o.slowUs) },
    args: ['--log-level', 'info', '--state.cacheMaxBytes', String(o.cacheBytes)],
  });
  await worker.url();
  const t0 = Date.now();
  const samples: Sample[] = [];
  let producing = true;
  let produced = 0;
  const deadline = o.mode === 'slow' ? t0 + o.minutes * 60_000 : t0 + 3 * 3600_000;
  const producer = (
    o.mode === 'keys'
      ? produceStream(input, { n: o.keys })
      : produceStream(input, {
          n: Number.MAX_SAFE_INTEGER,
          keySpace: 100_000,
          rate: o.rate,
          stop: () => Date.now() > deadline,
        })
  ).then((n) => {
    produced = n;
    producing = false;
  });
  try {
    for (;;) {
      await sleep(2000);
      const s = await sample(worker, t0, input, output);
      if (!s) throw new Error(`the worker exited:\n${worker.logs.slice(-30).join('\n')}`);
      samples.push(s);
      if (samples.length % 15 === 0)
        process.stderr.write(
          `[${s.s.toFixed(0)}s] in ${s.in} out ${s.out} lag ${s.lag} rss ${fmtMb(s.rss)} MiB heap ${fmtMb(s.heap)} MiB cache ${fmtMb(s.cache)} MiB\n`,
        );
      if (o.mode === 'keys' && !producing && s.out >= o.keys) break; // NaN (failed scrape) compares false
      if (o.mode === 'slow' && Date.now() > deadline) break;
      if (Date.now() > deadline) throw new Error('timed out');
    }
    await producer;
  } finally {
    await worker.kill('SIGKILL');
    rmSync(stateDir, { recursive: true, force: true });
    await deleteTopicsMatching(id).catch(() => undefined);
  }
  const v = verdict(samples);
  const seconds = samples[samples.length - 1]!.s;
  const heading =
    o.mode === 'keys'
      ? `## ${o.keys.toLocaleString('en')} distinct keys, state.cacheMaxBytes = ${fmtMb(o.cacheBytes)} MiB (running-sum, exactly_once)`
      : `## Overloaded worker: slow-sum (${o.slowUs} µs of CPU per record) offered ${o.rate.toLocaleString('en')} records/s for ${o.minutes} min`;
  const md = [
    heading,
    '',
    `- command: \`KAFKA_BROKERS=${brokers().join(',')} node dist/bench/memory-bound.js ${process.argv.slice(2).join(' ')}\``,
    `- node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), shared with other jobs; date ${new Date().toISOString()}`,
    `- one worker, ${o.partitions} input partitions, default config except \`--state.cacheMaxBytes ${o.cacheBytes}\`; RSS from /proc/<pid>/status every 2 s`,
    `- records produced: ${produced.toLocaleString('en')}; run time ${seconds.toFixed(0)} s`,
    `- **${v.text}**`,
    '',
    table(samples, 16),
    '',
  ].join('\n');
  process.stdout.write(`${md}\n`);
  if (o.write) {
    const dir = join(root, 'bench/results');
    if (!existsSync(dir)) mkdirSync(dir, { recursive: true });
    const file = join(dir, `memory-${new Date().toISOString().slice(0, 10)}.md`);
    if (!existsSync(file)) appendFileSync(file, '# Sluice memory bounds (bench/memory-bound.ts)\n\n');
    appendFileSync(file, `${md}\n`);
    process.stderr.write(`written to ${file}\n`);
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`${e?.stack ?? e}\n`);
    process.exit(1);
  },
);
