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
 *  --mode sink: a slow sink. The running-sum job is offered --rate records/s while the broker
 *     throttles the worker's producers to --sink-bytes bytes/s (a Kafka client quota,
 *     `producer_byte_rate`, set with the Kafka tools of the local launcher's jars): every
 *     checkpoint's writes crawl, the lag grows, RSS must stay flat.
 *
 *   npx tsc -p . && KAFKA_BROKERS=127.0.0.1:19792 node dist/bench/memory-bound.js
 *     [--mode keys|slow|sink] [--keys N] [--cache-bytes B] [--minutes M] [--rate R] [--slow-us U]
 *     [--sink-bytes B] [--heap-mb M] [--fetch-bytes B (processing.maxBytesPerPartition)]
 *
 * `--heap-mb M` runs the worker with `--max-old-space-size=M`: V8 collects lazily, so a growing
 * "heap used" may be garbage; under a hard limit a worker that really retained memory would die
 * with an out-of-memory error, one that does not keeps running.
 *     [--partitions P] [--no-write]
 *
 * Results (samples of RSS, heap, cache bytes and progress, and the verdict) are printed and
 * appended to bench/results/memory-<YYYY-MM-DD>.md.
 */

import { execFileSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, hostname, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { resolveKafka } from '../src/dev/local-kafka.js';
import { brokers, createTopics, deleteTopicsMatching, testKafka, uniqueName } from '../test/helpers/kafka.js';
import { metricSum, spawnWorker, type WorkerProcess } from '../test/helpers/workers.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

interface Options {
  mode: 'keys' | 'slow' | 'sink';
  sinkBytes: number;
  /** Worker heap limit (--max-old-space-size), 0 = Node's default. */
  heapMb: number;
  /** processing.maxBytesPerPartition of the worker, 0 = default (1 MiB). */
  fetchBytes: number;
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
    sinkBytes: 50_000,
    heapMb: 0,
    fetchBytes: 0,
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
        if (m !== 'keys' && m !== 'slow' && m !== 'sink') throw new Error('--mode is keys, slow or sink');
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
      case '--sink-bytes':
        o.sinkBytes = Math.floor(num());
        break;
      case '--fetch-bytes':
        o.fetchBytes = Math.floor(num());
        break;
      case '--heap-mb':
        o.heapMb = Math.floor(num());
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

/** Sets (or with `rate` undefined, deletes) a broker-side produce quota for one client id. */
async function produceQuota(clientId: string, rate: number | undefined): Promise<void> {
  const { libsDir } = await resolveKafka({});
  const change =
    rate === undefined
      ? ['--delete-config', 'producer_byte_rate']
      : ['--add-config', `producer_byte_rate=${rate}`];
  execFileSync(
    'java',
    [
      '-cp',
      `${libsDir}/*`,
      'org.apache.kafka.tools.ConfigCommand',
      '--bootstrap-server',
      brokers()[0]!,
      '--alter',
      ...change,
      '--entity-type',
      'clients',
      '--entity-name',
      clientId,
    ],
    { stdio: 'ignore' },
  );
}

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
  /** Checkpoints that failed (each resets its task). */
  fails: number;
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
  if (text === '')
    return {
      s: (Date.now() - t0) / 1000,
      rss,
      heap: NaN,
      cache: NaN,
      in: NaN,
      out: NaN,
      lag: NaN,
      fails: NaN,
    };
  return {
    s: (Date.now() - t0) / 1000,
    rss,
    heap: metricSum(text, 'sluice_node_nodejs_heap_size_used_bytes'),
    cache: metricSum(text, 'sluice_state_cache_bytes'),
    in: metricSum(text, 'sluice_records_in_total', { topic: input }),
    out: metricSum(text, 'sluice_records_out_total', { topic: output }),
    lag: metricSum(text, 'sluice_consumer_lag', { topic: input }),
    fails: metricSum(text, 'sluice_checkpoint_failures_total'),
  };
}

function table(samples: Sample[], rows: number): string {
  const pick: Sample[] = [];
  const step = Math.max(1, Math.floor(samples.length / rows));
  for (let i = 0; i < samples.length; i += step) pick.push(samples[i]!);
  if (pick[pick.length - 1] !== samples[samples.length - 1]) pick.push(samples[samples.length - 1]!);
  const lines = [
    '| t (s) | input records processed | output records committed | input lag | RSS (MiB) | heap used (MiB) | cache (MiB, sum of tasks) | failed checkpoints |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  const n = (v: number) => (Number.isNaN(v) ? '—' : v.toLocaleString('en'));
  const mb = (v: number) => (Number.isNaN(v) ? '—' : fmtMb(v));
  for (const x of pick)
    lines.push(
      `| ${x.s.toFixed(0)} | ${n(x.in)} | ${n(x.out)} | ${n(x.lag)} | ${fmtMb(x.rss)} | ${mb(x.heap)} | ${mb(x.cache)} | ${n(x.fails)} |`,
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
  const id = uniqueName(`bench-mem-${o.mode}`);
  const input = `${id}-in`;
  const output = `${id}-out`;
  await createTopics([
    { topic: input, partitions: o.partitions },
    { topic: output, partitions: o.partitions },
  ]);
  const stateDir = mkdtempSync(join(tmpdir(), 'sluice-bench-mem-'));
  const job = o.mode === 'slow' ? 'slow-sum' : 'running-sum';
  const worker = spawnWorker(job, {
    name: 'w',
    stateDir,
    env: {
      TEST_APP_ID: id,
      TEST_INPUT: input,
      TEST_OUTPUT: output,
      TEST_SLOW_US: String(o.slowUs),
      // WORKER_NODE_OPTIONS: extra Node flags for the worker (e.g. --heapsnapshot-near-heap-limit=1).
      NODE_OPTIONS: [
        o.heapMb > 0 ? `--max-old-space-size=${o.heapMb}` : '',
        process.env.WORKER_NODE_OPTIONS ?? '',
      ]
        .join(' ')
        .trim(),
    },
    args: [
      '--log-level',
      'info',
      '--state.cacheMaxBytes',
      String(o.cacheBytes),
      ...(o.fetchBytes > 0 ? ['--processing.maxBytesPerPartition', String(o.fetchBytes)] : []),
    ],
  });
  await worker.url();
  // The worker's Kafka client id (src/runtime/worker.ts): <kafka.clientId>-<appId>-<host>-<pid>.
  const clientId = `sluice-${id}-${hostname()}-${worker.child.pid}`;
  if (o.mode === 'sink') await produceQuota(clientId, o.sinkBytes);
  const t0 = Date.now();
  const samples: Sample[] = [];
  let producing = true;
  let produced = 0;
  const deadline = o.mode !== 'keys' ? t0 + o.minutes * 60_000 : t0 + 3 * 3600_000;
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
          `[${s.s.toFixed(0)}s] in ${s.in} out ${s.out} lag ${s.lag} rss ${fmtMb(s.rss)} MiB heap ${fmtMb(s.heap)} MiB cache ${fmtMb(s.cache)} MiB failed checkpoints ${s.fails}\n`,
        );
      if (o.mode === 'keys' && !producing && s.out >= o.keys) break; // NaN (failed scrape) compares false
      if (o.mode !== 'keys' && Date.now() > deadline) break;
      if (Date.now() > deadline) throw new Error('timed out');
    }
    await producer;
  } finally {
    const byMsg = new Map<string, number>();
    for (const l of worker.logs) {
      const m = /"msg":"([^"]{0,80})/.exec(l)?.[1] ?? l.slice(0, 80);
      byMsg.set(m, (byMsg.get(m) ?? 0) + 1);
    }
    process.stderr.write(
      `worker log lines kept: ${worker.logs.length}; most frequent: ${JSON.stringify([...byMsg].sort((a, b) => b[1] - a[1]).slice(0, 5))}\n`,
    );
    await worker.kill('SIGKILL');
    if (o.mode === 'sink') await produceQuota(clientId, undefined).catch(() => undefined);
    rmSync(stateDir, { recursive: true, force: true });
    await deleteTopicsMatching(id).catch(() => undefined);
  }
  const v = verdict(samples);
  const seconds = samples[samples.length - 1]!.s;
  const heading =
    o.mode === 'keys'
      ? `## ${o.keys.toLocaleString('en')} distinct keys, state.cacheMaxBytes = ${fmtMb(o.cacheBytes)} MiB (running-sum, exactly_once)`
      : o.mode === 'slow'
        ? `## Overloaded worker: slow-sum (${o.slowUs} µs of CPU per record) offered ${o.rate.toLocaleString('en')} records/s for ${o.minutes} min`
        : `## Slow sink: running-sum offered ${o.rate.toLocaleString('en')} records/s for ${o.minutes} min, its producers throttled by the broker to ${o.sinkBytes.toLocaleString('en')} bytes/s`;
  const md = [
    heading,
    '',
    `- command: \`KAFKA_BROKERS=${brokers().join(',')} node dist/bench/memory-bound.js ${process.argv.slice(2).join(' ')}\``,
    `- node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), shared with other jobs; date ${new Date().toISOString()}`,
    `- one worker, ${o.partitions} input partitions, default config except \`--state.cacheMaxBytes ${o.cacheBytes}\`${o.heapMb > 0 ? `, worker heap limited to ${o.heapMb} MiB (--max-old-space-size)` : ''}${o.fetchBytes > 0 ? `, \`--processing.maxBytesPerPartition ${o.fetchBytes}\`` : ''}; RSS from /proc/<pid>/status every 2 s`,
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
