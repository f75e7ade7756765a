/**
 * Core end-to-end benchmark of the running-sum crash-test job (keyBy + valueState) on ONE real
 * worker process (`sluice run`, as the crash tests spawn it):
 *
 *  1. Throughput under `exactly_once` and `at_least_once`: N records (4 partitions, 1000 keys)
 *     are produced before the worker starts; the clock runs from spawning the worker until its
 *     `sluice_records_out_total{topic=<output>}` reaches N (counted after each checkpoint, i.e.
 *     committed output). So the time includes process start, the group join and the topic setup.
 *  2. Recovery after SIGKILL with K keys of state (one record per key, exactly_once): the worker
 *     processes K records and is killed; it is restarted (a) on the same state dir (only the
 *     changelog tail past the local checkpoint is replayed) and (b) after its state dir was
 *     deleted (a full restore from the changelog: the "task moved to a new worker" case). Reported:
 *     spawn → /readyz 200, split into the group-join wait (until the first assignment) and the
 *     restore, plus the `sluice_restore_records_total` sum.
 *
 *   npx tsc -p . && KAFKA_BROKERS=127.0.0.1:19092 node dist/bench/core.js [--records N] [--keys K]
 *     [--skip-throughput] [--skip-recovery] [--no-write] [--append]
 *
 * Results are printed as a markdown table and written to bench/results/core-<YYYY-MM-DD>.md
 * (`--append` adds to that file instead of replacing it).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../src/dev/broker-process.js';
import { createTopics, deleteTopicsMatching, testKafka, uniqueName } from '../test/helpers/kafka.js';
import { metricSum } from '../test/helpers/workers.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SLUICE_BIN = join(root, 'bin/sluice.js');
const JOB = join(root, 'dist/test/fixtures/jobs/running-sum.js');

// ---------------------------------------------------------------------------------------------
// Options

function parseOptions(argv: string[]) {
  const opts = {
    records: 200_000,
    keys: 100_000,
    throughputKeys: 1000,
    partitions: 4,
    skipThroughput: false,
    skipRecovery: false,
    write: true,
    append: false,
    timeoutMs: 600_000,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const [flag, inline] = a.includes('=')
      ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]
      : [a, undefined];
    const num = () => {
      const v = Number(inline ?? argv[++i]);
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${flag} expects a positive number`);
      return Math.floor(v);
    };
    switch (flag) {
      case '--records':
        opts.records = num();
        break;
      case '--keys':
        opts.keys = num();
        break;
      case '--throughput-keys':
        opts.throughputKeys = num();
        break;
      case '--partitions':
        opts.partitions = num();
        break;
      case '--timeout-ms':
        opts.timeoutMs = num();
        break;
      case '--skip-throughput':
        opts.skipThroughput = true;
        break;
      case '--skip-recovery':
        opts.skipRecovery = true;
        break;
      case '--no-write':
        opts.write = false;
        break;
      case '--append':
        opts.append = true;
        break;
      default:
        throw new Error(`unknown option ${a}`);
    }
  }
  return opts;
}
const opts = parseOptions(process.argv.slice(2));

// ---------------------------------------------------------------------------------------------
// Helpers

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now();

/** Produces records fast: plain producer, acks=all, several batches in flight. */
async function produceFast(
  topic: string,
  n: number,
  make: (i: number) => { key: string; value: string },
): Promise<number> {
  const started = now();
  const p = testKafka().producer({ allowAutoTopicCreation: false });
  await p.connect();
  try {
    const BATCH = 10_000;
    const PARALLEL = 4;
    const inflight: Promise<unknown>[] = [];
    for (let i = 0; i < n; i += BATCH) {
      const messages = [];
      for (let j = i; j < Math.min(n, i + BATCH); j++) messages.push(make(j));
      inflight.push(p.send({ topic, acks: -1, messages }));
      if (inflight.length >= PARALLEL) await inflight.shift();
    }
    await Promise.all(inflight);
  } finally {
    await p.disconnect();
  }
  return (now() - started) / 1000;
}

interface Worker {
  child: ChildProcess;
  base: string;
  stateDir: string;
  logs: string[];
  exited: Promise<number | string>;
  kill(signal: NodeJS.Signals): Promise<number | string>;
  get(path: string): Promise<{ status: number; body: string }>;
}

function startWorker(p: {
  appId: string;
  input: string;
  output: string;
  stateDir: string;
  port: number;
  guarantee: 'exactly_once' | 'at_least_once';
}): Worker {
  // Pass the environment through, minus SLUICE_* variables: the config loader rejects unknown ones
  // and known ones would silently change the measured configuration.
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SLUICE_')) env[k] = v;
  Object.assign(env, {
    KAFKA_BROKERS: process.env.KAFKA_BROKERS,
    TEST_APP_ID: p.appId,
    TEST_INPUT: p.input,
    TEST_OUTPUT: p.output,
  });
  const child = spawn(
    process.execPath,
    [
      SLUICE_BIN,
      'run',
      JOB,
      '--http-port',
      String(p.port),
      '--log-level',
      'warn',
      '--log-format',
      'json',
      '--state-dir',
      p.stateDir,
      '--processing.guarantee',
      p.guarantee,
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const logs: string[] = [];
  const onData = (d: Buffer) => {
    for (const line of d.toString().split('\n')) if (line) logs.push(line);
    if (logs.length > 500) logs.splice(0, logs.length - 200);
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<number | string>((r) => child.once('exit', (code, sig) => r(code ?? sig ?? -1)));
  const base = `http://127.0.0.1:${p.port}`;
  return {
    child,
    base,
    stateDir: p.stateDir,
    logs,
    exited,
    async kill(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
    async get(path) {
      const res = await fetch(`${base}${path}`, { signal: AbortSignal.timeout(5000) });
      return { status: res.status, body: await res.text() };
    },
  };
}

/** Polls `fn` every `intervalMs` until it returns true; fails if the worker exits or on timeout. */
async function until(w: Worker, what: string, fn: () => Promise<boolean>, intervalMs = 100): Promise<void> {
  const started = now();
  let dead: number | string | undefined;
  void w.exited.then((c) => {
    dead = c;
  });
  for (;;) {
    if (dead !== undefined)
      throw new Error(`worker exited (${dead}) while waiting for ${what}:\n${w.logs.slice(-30).join('\n')}`);
    if (now() - started > opts.timeoutMs)
      throw new Error(`timed out waiting for ${what}:\n${w.logs.slice(-30).join('\n')}`);
    try {
      if (await fn()) return;
    } catch {
      // HTTP not up yet
    }
    await sleep(intervalMs);
  }
}

async function recordsOut(w: Worker, topic: string): Promise<number> {
  const { body } = await w.get('/metrics');
  return metricSum(body, 'sluice_records_out_total', { topic });
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

// ---------------------------------------------------------------------------------------------
// 1. Throughput

interface ThroughputResult {
  guarantee: string;
  records: number;
  seconds: number;
  readySeconds: number;
  firstOutputSeconds: number;
  produceSeconds: number;
}

async function throughput(guarantee: 'exactly_once' | 'at_least_once'): Promise<ThroughputResult> {
  const N = opts.records;
  const id = uniqueName(`bench-tp-${guarantee === 'exactly_once' ? 'eos' : 'alo'}`);
  const input = `${id}-in`;
  const output = `${id}-out`;
  const stateDir = mkdtempSync(join(tmpdir(), 'sluice-bench-'));
  await createTopics([
    { topic: input, partitions: opts.partitions },
    { topic: output, partitions: opts.partitions },
  ]);
  let w: Worker | undefined;
  try {
    const produceSeconds = await produceFast(input, N, (i) => {
      const k = `k${i % opts.throughputKeys}`;
      return { key: k, value: JSON.stringify({ k, v: 1, seq: i }) };
    });
    const port = await freePort();
    const t0 = now();
    w = startWorker({ appId: id, input, output, stateDir, port, guarantee });
    let readyAt = 0;
    let firstOutAt = 0;
    let done = 0;
    await until(
      w,
      `${N} records out`,
      async () => {
        if (!readyAt && (await w!.get('/readyz')).status === 200) readyAt = now();
        const out = await recordsOut(w!, output);
        if (out > 0 && !firstOutAt) firstOutAt = now();
        done = out;
        return out >= N;
      },
      100,
    );
    const seconds = (now() - t0) / 1000;
    if (done !== N) console.warn(`warning: ${guarantee}: ${done} records out, expected ${N}`);
    return {
      guarantee,
      records: N,
      seconds,
      readySeconds: readyAt ? (readyAt - t0) / 1000 : Number.NaN,
      firstOutputSeconds: (firstOutAt - t0) / 1000,
      produceSeconds,
    };
  } finally {
    await w?.kill('SIGKILL');
    rmSync(stateDir, { recursive: true, force: true });
    await deleteTopicsMatching(id).catch(() => undefined);
  }
}

// ---------------------------------------------------------------------------------------------
// 2. Recovery

interface RecoveryResult {
  keys: number;
  processSeconds: number;
  case: string;
  readySeconds: number;
  joinSeconds: number;
  restoreSeconds: number;
  restoreDurationSum: number;
  restoredRecords: number;
}

/** Restarts and measures spawn → first assignment → /readyz 200. */
async function measureRestart(
  caseName: string,
  keys: number,
  processSeconds: number,
  start: () => Worker,
): Promise<{ w: Worker; r: RecoveryResult }> {
  const t0 = now();
  const w = start();
  let assignedAt = 0;
  await until(
    w,
    '/readyz 200',
    async () => {
      const r = await w.get('/readyz');
      if (r.status === 200) {
        if (!assignedAt) assignedAt = now();
        return true;
      }
      // "not ready: joining the group" / "worker starting" until the first assignment, then
      // "restoring <tasks>" while the changelogs are replayed.
      if (!assignedAt && r.body.includes('restoring')) assignedAt = now();
      return false;
    },
    50,
  );
  const readyAt = now();
  const m = (await w.get('/metrics')).body;
  return {
    w,
    r: {
      keys,
      processSeconds,
      case: caseName,
      readySeconds: (readyAt - t0) / 1000,
      joinSeconds: (assignedAt - t0) / 1000,
      restoreSeconds: (readyAt - assignedAt) / 1000,
      restoreDurationSum: metricSum(m, 'sluice_restore_duration_seconds_sum'),
      restoredRecords: metricSum(m, 'sluice_restore_records_total'),
    },
  };
}

async function recovery(K: number): Promise<RecoveryResult[]> {
  const id = uniqueName('bench-rec');
  const input = `${id}-in`;
  const output = `${id}-out`;
  const stateDir = mkdtempSync(join(tmpdir(), 'sluice-bench-'));
  await createTopics([
    { topic: input, partitions: opts.partitions },
    { topic: output, partitions: opts.partitions },
  ]);
  const port = await freePort();
  const start = () => startWorker({ appId: id, input, output, stateDir, port, guarantee: 'exactly_once' });
  let w: Worker | undefined;
  const results: RecoveryResult[] = [];
  try {
    await produceFast(input, K, (i) => {
      const k = `k${i}`;
      return { key: k, value: JSON.stringify({ k, v: 1, seq: i }) };
    });
    const t0 = now();
    w = start();
    await until(w, `${K} records out`, async () => (await recordsOut(w!, output)) >= K, 200);
    const processSeconds = (now() - t0) / 1000;
    // Output is counted after the checkpoint's transaction committed, and the changelog writes are
    // in the same transaction: all K state updates are in the changelog now.

    // (a) SIGKILL, restart on the same state dir: replay of the changelog tail only.
    await w.kill('SIGKILL');
    let m = await measureRestart('SIGKILL, same state dir (tail replay)', K, processSeconds, start);
    w = m.w;
    results.push(m.r);

    // (b) SIGKILL, state dir deleted: full restore from the changelog.
    await w.kill('SIGKILL');
    rmSync(stateDir, { recursive: true, force: true });
    mkdirSync(stateDir, { recursive: true });
    m = await measureRestart('SIGKILL, state dir deleted (full restore)', K, processSeconds, start);
    w = m.w;
    results.push(m.r);
    return results;
  } finally {
    await w?.kill('SIGKILL');
    rmSync(stateDir, { recursive: true, force: true });
    await deleteTopicsMatching(id).catch(() => undefined);
  }
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<void> {
  if (!process.env.KAFKA_BROKERS) throw new Error('set KAFKA_BROKERS (e.g. 127.0.0.1:19092)');
  const date = new Date().toISOString().slice(0, 10);
  const command =
    `KAFKA_BROKERS=${process.env.KAFKA_BROKERS} node dist/bench/core.js ${process.argv.slice(2).join(' ')}`.trim();
  const lines: string[] = [];
  const out = (s = '') => {
    lines.push(s);
    console.log(s);
  };
  out(`# Sluice core benchmark — running-sum job, one worker (${date})`);
  out();
  out(`- command: \`${command}\``);
  out(
    `- node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), ${process.platform}/${process.arch}`,
  );
  out(`- kafka brokers: ${process.env.KAFKA_BROKERS}`);
  out(`- date: ${new Date().toISOString()}`);
  out(
    `- input/output topics: ${opts.partitions} partitions; worker flags: --log-level warn, otherwise default config`,
  );
  out();

  if (!opts.skipThroughput) {
    const tp: ThroughputResult[] = [];
    for (const g of ['exactly_once', 'at_least_once'] as const) {
      console.error(`throughput ${g}: ${opts.records} records…`);
      tp.push(await throughput(g));
    }
    out(`## Throughput (${fmt(opts.records)} pre-produced records, ${fmt(opts.throughputKeys)} keys)`);
    out();
    out(
      'Time from spawning the worker until `sluice_records_out_total{topic=<output>}` = N (committed output); includes process start and the group join.',
    );
    out();
    out(
      '| guarantee | records | seconds | records/s | spawn → ready (s) | spawn → first output (s) | records/s after first output |',
    );
    out('|---|---:|---:|---:|---:|---:|---:|');
    for (const r of tp)
      out(
        `| ${r.guarantee} | ${fmt(r.records)} | ${fmt(r.seconds, 2)} | ${fmt(r.records / r.seconds)} | ${fmt(r.readySeconds, 2)} | ${fmt(r.firstOutputSeconds, 2)} | ${r.seconds - r.firstOutputSeconds >= 1 ? fmt(r.records / (r.seconds - r.firstOutputSeconds)) : '—'} |`,
      );
    out();
  }

  if (!opts.skipRecovery) {
    console.error(`recovery: ${opts.keys} keys…`);
    const rec = await recovery(opts.keys);
    out(`## Recovery after SIGKILL (${fmt(opts.keys)} keys of state, exactly_once)`);
    out();
    out(
      `Processing the ${fmt(opts.keys)} records (one per key) took ${fmt(rec[0]!.processSeconds, 2)} s from spawn. ` +
        'Restart time = spawn → /readyz 200; "group join" = spawn → first assignment (includes waiting for the killed member\'s session to expire), "restore" = first assignment → ready.',
    );
    out();
    out(
      '| case | spawn → ready (s) | group join (s) | restore (s) | sluice_restore_duration_seconds sum (over tasks) | restored records | restored records/s |',
    );
    out('|---|---:|---:|---:|---:|---:|---:|');
    for (const r of rec)
      out(
        `| ${r.case} | ${fmt(r.readySeconds, 2)} | ${fmt(r.joinSeconds, 2)} | ${fmt(r.restoreSeconds, 2)} | ${fmt(r.restoreDurationSum, 2)} | ${fmt(r.restoredRecords)} | ${r.restoredRecords > 0 && r.restoreSeconds > 0 ? fmt(r.restoredRecords / r.restoreSeconds) : '—'} |`,
      );
    out();
  }

  if (opts.write) {
    const dir = join(root, 'bench/results');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `core-${date}.md`);
    if (opts.append && existsSync(file)) appendFileSync(file, `\n---\n\n${lines.join('\n')}\n`);
    else writeFileSync(file, `${lines.join('\n')}\n`);
    console.error(`written to ${file}`);
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e?.stack ?? e);
    process.exit(1);
  },
);
