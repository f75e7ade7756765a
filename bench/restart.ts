/**
 * Restart latency (issue 12, "Measure"): how long the output of the running-sum job
 * (test/fixtures/jobs/running-sum.ts: keyBy + one valueState per key, one output per input) stops
 * when its workers restart. Two scenarios, each against the code of any checkout (`--code DIR`, a
 * built tree: `DIR/bin/sluice.js` and `DIR/dist/test/fixtures/jobs/running-sum.js`), so the same
 * driver times the code before and after a change:
 *
 * - `--scenario restart`: ONE worker, default settings (`sluice run <job> --state-dir D`,
 *   exactly-once, the default 30 s session timeout), `--partitions` input partitions (4). It is
 *   loaded with `--keys` keys of state (one record per key, until the output holds that many
 *   records read_committed), then a paced input of `--rate` records/s (2000) over the same keys
 *   flows. Each run: SIGKILL the worker, spawn it again at once on the same folder, and time
 *   spawn → the first committed output of an input produced after the kill (its `seq` is at least
 *   the producer's next seq at the moment of the kill; only the new process can have made it, and
 *   an aborted record of the killed one can never pass for it). Also reported: spawn → /readyz 200.
 *   Between runs the worker catches up (output count within one second of input) and runs 3 s.
 * - `--scenario rolling`: `--workers` workers (3), `--partitions` (6), the same load, then
 *   `--rate` records/s (3000). Each run is a rolling restart: for each worker in turn SIGTERM,
 *   wait for its exit, spawn it on the same folder, wait for /readyz 200; then 5 s more. Reported
 *   over that window: the longest gap between consecutive deliveries of committed output to the
 *   reader (any partition), the p99 of those gaps, the longest gap of one output partition, and the
 *   worst end-to-end latency (receive time − the input's timestamp, which the output carries); and
 *   the same over the 10 s of steady input just before it, for scale.
 *
 * The reader is one kafkajs read_committed consumer in this process (with Sluice's fixed aborted
 * filter, see src/kafka/aborted-filter.ts), started before the workers and reading the output
 * from the beginning; its receive time (Date.now() when kafkajs hands over a fetched batch) is the
 * time of an output. At the end the input stops, the output must hold exactly one record per input
 * record (exactly-once), and Kafka's own console consumer (Java, read_committed) must count the
 * same output as the kafkajs reader did (`--no-java` skips that check).
 *
 *   npm run build && KAFKA_BROKERS=127.0.0.1:9092 node dist/bench/restart.js --scenario restart \
 *     --keys 100000 --code /work/wt-base --label before [--runs 3] [--rate 2000] [--partitions 4]
 *     [--timeout-min 30] [--no-java] [--no-write]
 *
 * Bounded (`--timeout-min`, default 30: past it, everything is cleaned up and it exits with 2) and
 * self-cleaning: the workers are killed, the state folders and every topic `<appId>…` deleted, the
 * reader's group deleted (the app's group too, when the broker lets it: static members of the
 * after code stay in it until their session times out). The result is printed and appended to
 * bench/results/restart-<YYYY-MM-DD>.md.
 */
import { execFileSync, spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Consumer, Producer } from 'kafkajs';
import { freePort } from '../src/dev/broker-process.js';
import { jobTopics, testKafka, uniqueName, withAdmin } from '../test/helpers/kafka.js';
import { readCommittedWithJava } from './java-reader.js';
import { percentile, produceFast } from './lib/kafka-io.js';

const here = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  scenario: 'restart' | 'rolling';
  keys: number;
  code: string;
  label: string;
  runs: number;
  rate: number;
  partitions: number;
  workers: number;
  timeoutMin: number;
  java: boolean;
  write: boolean;
}

function parseOptions(argv: string[]): Options {
  let scenario: Options['scenario'] = 'restart';
  let code = here;
  let label: string | undefined;
  const n: Record<string, number | undefined> = {};
  let java = true;
  let write = true;
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    const num = () => {
      const v = Number(value());
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${flag} expects a positive number`);
      return v;
    };
    if (flag === '--scenario') {
      const v = value();
      if (v !== 'restart' && v !== 'rolling') throw new Error('--scenario is restart or rolling');
      scenario = v;
    } else if (flag === '--code') code = resolve(value());
    else if (flag === '--label') label = value();
    else if (flag === '--keys') n.keys = Math.floor(num());
    else if (flag === '--runs') n.runs = Math.floor(num());
    else if (flag === '--rate') n.rate = num();
    else if (flag === '--partitions') n.partitions = Math.floor(num());
    else if (flag === '--workers') n.workers = Math.floor(num());
    else if (flag === '--timeout-min') n.timeoutMin = num();
    else if (flag === '--no-java') java = false;
    else if (flag === '--no-write') write = false;
    else throw new Error(`unknown option ${flag}`);
  }
  const rolling = scenario === 'rolling';
  for (const f of ['bin/sluice.js', 'dist/test/fixtures/jobs/running-sum.js'])
    if (!existsSync(join(code, f))) throw new Error(`--code ${code}: no ${f} (build it with npm run build)`);
  return {
    scenario,
    code,
    label: label ?? commitOf(code),
    keys: n.keys ?? 100_000,
    runs: n.runs ?? 3,
    rate: n.rate ?? (rolling ? 3000 : 2000),
    partitions: n.partitions ?? (rolling ? 6 : 4),
    workers: rolling ? (n.workers ?? 3) : 1,
    timeoutMin: n.timeoutMin ?? 30,
    java,
    write,
  };
}

function commitOf(dir: string): string {
  try {
    return execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return dir;
  }
}

// ---------------------------------------------------------------------------------------------
// Workers of the code under test

interface Worker {
  name: string;
  logs: string[];
  exited: Promise<number | string>;
  ready(timeoutMs: number): Promise<number>;
  kill(signal: NodeJS.Signals): Promise<number | string>;
}

function workerEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  // SLUICE_* would change the measured configuration.
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SLUICE_')) env[k] = v;
  return { ...env, ...extra };
}

async function spawnWorker(
  code: string,
  name: string,
  stateDir: string,
  env: Record<string, string>,
): Promise<Worker> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      join(code, 'bin/sluice.js'),
      'run',
      join(code, 'dist/test/fixtures/jobs/running-sum.js'),
      '--state-dir',
      stateDir,
      '--http-port',
      String(port),
      '--log-format',
      'json',
      '--log-level',
      'warn',
      '--processing.guarantee',
      'exactly_once',
    ],
    { env: workerEnv(env), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const logs: string[] = [];
  const onData = (d: Buffer) => {
    for (const line of d.toString().split('\n')) if (line) logs.push(line);
    if (logs.length > 400) logs.splice(0, logs.length - 200);
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<number | string>((r) => child.once('exit', (c, s) => r(c ?? s ?? -1)));
  let dead: number | string | undefined;
  void exited.then((c) => {
    dead = c;
  });
  return {
    name,
    logs,
    exited,
    async ready(timeoutMs) {
      const t0 = Date.now();
      for (;;) {
        if (dead !== undefined) throw new Error(`${name} exited (${dead}):\n${logs.slice(-20).join('\n')}`);
        if (Date.now() - t0 > timeoutMs)
          throw new Error(`${name} not ready after ${timeoutMs} ms:\n${logs.slice(-20).join('\n')}`);
        try {
          const r = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(1000) });
          if (r.status === 200) return Date.now();
        } catch {
          // not listening yet
        }
        await sleep(100);
      }
    },
    async kill(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Input and output

interface In {
  k: string;
  v: number;
  seq: number;
}

/** Paced input over `keys` keys (uniform), timestamp = send time, seq counting on from `from`. */
async function steadyInput(topic: string, rate: number, keys: number, from: number) {
  const p: Producer = testKafka().producer({ allowAutoTopicCreation: false });
  await p.connect();
  let seq = from;
  let stopped = false;
  let errors = 0;
  let rnd = 12345;
  const next = () => {
    rnd = (Math.imul(rnd, 1103515245) + 12345) >>> 0;
    return rnd / 4294967296;
  };
  const pending = new Set<Promise<unknown>>();
  const t0 = performance.now();
  let issued = 0;
  const loop = (async () => {
    while (!stopped) {
      const due = Math.floor(((performance.now() - t0) / 1000) * rate);
      if (due > issued && pending.size < 50) {
        const ts = String(Date.now());
        const messages = [];
        for (; issued < due; issued++) {
          const k = `k${Math.floor(next() * keys)}`;
          const v: In = { k, v: 1, seq: seq++ };
          messages.push({ key: k, value: JSON.stringify(v), timestamp: ts });
        }
        const pr = p
          .send({ topic, acks: -1, messages })
          .catch(() => {
            errors++;
          })
          .finally(() => pending.delete(pr));
        pending.add(pr);
      }
      await sleep(20);
    }
    await Promise.all(pending);
    await p.disconnect();
  })();
  return {
    /** The seq the next input record will get: every record from it on is produced after now. */
    nextSeq: () => seq,
    sent: () => seq - from,
    errors: () => errors,
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

interface Arrival {
  t: number;
  partition: number;
  n: number;
  /** largest receive time − input timestamp in the delivery (ms) */
  latency: number;
}

/** The read_committed reader of the output, from the beginning. */
async function outputReader(topic: string) {
  const groupId = uniqueName('bench-restart-reader');
  const c: Consumer = testKafka().consumer({ groupId, readUncommitted: false, maxWaitTimeInMs: 50 });
  const st = {
    groupId,
    count: 0,
    /** outputs of inputs with seq ≥ armedSeq count as new */
    armedSeq: Number.POSITIVE_INFINITY,
    firstNewAt: 0,
    /** deliveries are kept from this time on (0: not kept) */
    keepSince: 0,
    arrivals: [] as Arrival[],
  };
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  await c.run({
    eachBatch: async ({ batch }) => {
      const now = Date.now();
      const msgs = batch.messages;
      if (msgs.length === 0) return;
      st.count += msgs.length;
      if (st.firstNewAt === 0 && st.armedSeq !== Number.POSITIVE_INFINITY)
        for (const m of msgs)
          if ((JSON.parse(m.value!.toString()) as In).seq >= st.armedSeq) {
            st.firstNewAt = now;
            break;
          }
      if (st.keepSince > 0) {
        let latency = 0;
        for (const m of msgs) latency = Math.max(latency, now - Number(m.timestamp));
        st.arrivals.push({ t: now, partition: batch.partition, n: msgs.length, latency });
      }
    },
  });
  return { st, stop: () => c.disconnect() };
}

async function until(what: string, timeoutMs: number, fn: () => boolean | Promise<boolean>): Promise<number> {
  const t0 = Date.now();
  while (!(await fn())) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
  return Date.now();
}

/** Gaps over [from, to]: between deliveries, overall and per partition, and the worst latency. */
function gaps(arrivals: Arrival[], partitions: number, from: number, to: number) {
  const inWin = arrivals.filter((a) => a.t >= from && a.t <= to);
  const before = arrivals.filter((a) => a.t < from);
  const all: number[] = [];
  let prev = before.length > 0 ? before[before.length - 1]!.t : from;
  for (const a of inWin) {
    all.push(a.t - prev);
    prev = a.t;
  }
  all.push(to - prev);
  let partitionMax = 0;
  for (let p = 0; p < partitions; p++) {
    const last = before.filter((a) => a.partition === p).pop();
    let q = last ? last.t : from;
    for (const a of inWin)
      if (a.partition === p) {
        partitionMax = Math.max(partitionMax, a.t - q);
        q = a.t;
      }
    partitionMax = Math.max(partitionMax, to - q);
  }
  return {
    maxGap: Math.max(...all),
    p99Gap: percentile(all, 99),
    partitionMaxGap: partitionMax,
    maxLatency: Math.max(0, ...inWin.map((a) => a.latency)),
    records: inWin.reduce((s, a) => s + a.n, 0),
  };
}

// ---------------------------------------------------------------------------------------------
// The run

const started = Date.now();
const note = (msg: string) =>
  process.stderr.write(`[restart +${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);
const s = (ms: number) => (ms / 1000).toFixed(2);

function stats(xs: number[]) {
  const sorted = [...xs].sort((a, b) => a - b);
  const median =
    sorted.length % 2 === 1
      ? sorted[(sorted.length - 1) / 2]!
      : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2;
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]! };
}

async function main(o: Options, cleanups: Array<() => Promise<void>>): Promise<number> {
  const load0 = loadavg();
  const { id, input, output, env } = await jobTopics('bench-restart', o.partitions);
  cleanups.push(async () => {
    await withAdmin(async (a) => {
      const topics = (await a.listTopics()).filter((t) => t.startsWith(id));
      if (topics.length > 0) await a.deleteTopics({ topics }).catch(() => undefined);
    });
  });
  note(`${o.scenario}, code ${o.label} (${o.code}), ${o.keys} keys, app ${id}`);
  const reader = await outputReader(output);
  cleanups.push(async () => {
    await reader.stop().catch(() => undefined);
    await withAdmin((a) => a.deleteGroups([reader.st.groupId, id])).catch(() => undefined);
  });
  const r = reader.st;

  const dirs: string[] = [];
  const workers: Worker[] = [];
  cleanups.push(async () => {
    await Promise.all(workers.map((w) => w.kill('SIGKILL')));
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  dumpLogs = () => {
    for (const w of workers) if (w) process.stderr.write(`--- ${w.name}\n${w.logs.slice(-20).join('\n')}\n`);
  };
  const start = async (i: number) => {
    workers[i] = await spawnWorker(o.code, `w${i}`, dirs[i]!, env);
    return Date.now();
  };
  for (let i = 0; i < o.workers; i++) {
    dirs.push(mkdtempSync(join(tmpdir(), `sluice-bench-restart-${i}-`)));
    await start(i);
  }
  await Promise.all(workers.map((w) => w.ready(180_000)));
  note(`${o.workers} worker(s) ready`);

  // Load: one record per key, until the output holds all of them (read_committed).
  const loadStart = Date.now();
  await produceFast(input, o.keys, (i) => {
    const v: In = { k: `k${i}`, v: 1, seq: i };
    return { key: v.k, value: JSON.stringify(v) };
  });
  await until(`${o.keys} outputs`, 900_000, () => r.count >= o.keys);
  const loadSeconds = (Date.now() - loadStart) / 1000;
  note(`loaded ${o.keys} keys in ${loadSeconds.toFixed(1)} s`);

  const steady = await steadyInput(input, o.rate, o.keys, o.keys);
  cleanups.push(() => steady.stop());
  r.keepSince = Date.now();
  const caughtUp = () =>
    until('the output to catch up with the input', 300_000, () => r.count >= o.keys + steady.sent() - o.rate);
  await sleep(10_000);

  const rows: Record<string, number>[] = [];
  const lines: string[] = [];
  if (o.scenario === 'restart') {
    for (let run = 1; run <= o.runs; run++) {
      await caughtUp();
      await sleep(3000);
      const w = workers[0]!;
      const load = loadavg()[0]!;
      r.firstNewAt = 0;
      r.armedSeq = steady.nextSeq();
      const killAt = Date.now();
      await w.kill('SIGKILL');
      const spawnAt = await start(0);
      const readyAt = workers[0]!.ready(300_000);
      await until('the first new output', 300_000, () => r.firstNewAt > 0);
      const row = {
        run,
        load,
        killToSpawn: spawnAt - killAt,
        spawnToFirstNew: r.firstNewAt - spawnAt,
        spawnToReady: (await readyAt) - spawnAt,
      };
      r.armedSeq = Number.POSITIVE_INFINITY;
      rows.push(row);
      note(
        `run ${run}: spawn → first new output ${s(row.spawnToFirstNew)} s, → /readyz ${s(row.spawnToReady)} s`,
      );
    }
    lines.push(
      '| run | load average (1 min) | kill → spawn (ms) | spawn → first new committed output (s) | spawn → /readyz 200 (s) |',
      '|---:|---:|---:|---:|---:|',
      ...rows.map(
        (x) =>
          `| ${x.run} | ${x.load!.toFixed(1)} | ${x.killToSpawn} | ${s(x.spawnToFirstNew!)} | ${s(x.spawnToReady!)} |`,
      ),
    );
  } else {
    for (let run = 1; run <= o.runs; run++) {
      await caughtUp();
      const load = loadavg()[0]!;
      const baseFrom = Date.now();
      await sleep(10_000);
      const rollFrom = Date.now();
      const steps: string[] = [];
      for (let i = 0; i < o.workers; i++) {
        const t0 = Date.now();
        const code = await Promise.race([workers[i]!.kill('SIGTERM'), sleep(60_000).then(() => 'timeout')]);
        if (code === 'timeout') await workers[i]!.kill('SIGKILL');
        const spawnAt = await start(i);
        const readyAt = await workers[i]!.ready(300_000);
        steps.push(`w${i} exit ${s(spawnAt - t0)} s (${code}), spawn → ready ${s(readyAt - spawnAt)} s`);
      }
      await sleep(5000);
      const rollTo = Date.now();
      const base = gaps(r.arrivals, o.partitions, baseFrom, rollFrom);
      const roll = gaps(r.arrivals, o.partitions, rollFrom, rollTo);
      r.arrivals = r.arrivals.filter((a) => a.t >= rollTo - 60_000);
      const row = {
        run,
        load,
        rollSeconds: (rollTo - rollFrom) / 1000,
        maxGap: roll.maxGap,
        p99Gap: roll.p99Gap,
        partitionMaxGap: roll.partitionMaxGap,
        maxLatency: roll.maxLatency,
        baseMaxGap: base.maxGap,
        baseP99Gap: base.p99Gap,
        basePartitionMaxGap: base.partitionMaxGap,
        baseMaxLatency: base.maxLatency,
      };
      rows.push(row);
      note(
        `run ${run}: longest gap ${s(roll.maxGap)} s, p99 ${s(roll.p99Gap)} s, one partition ${s(roll.partitionMaxGap)} s, worst latency ${s(roll.maxLatency)} s; ${steps.join('; ')}`,
      );
      lines.push(`- run ${run}: ${steps.join('; ')}`);
    }
    lines.unshift(
      '| run | load average (1 min) | roll (s) | longest gap (s) | p99 gap (s) | longest gap, one partition (s) | worst latency (s) | steady 10 s before: longest gap / p99 / one partition / worst latency (s) |',
      '|---:|---:|---:|---:|---:|---:|---:|---|',
      ...rows.map(
        (x) =>
          `| ${x.run} | ${x.load!.toFixed(1)} | ${x.rollSeconds!.toFixed(1)} | ${s(x.maxGap!)} | ${s(x.p99Gap!)} | ${s(x.partitionMaxGap!)} | ${s(x.maxLatency!)} | ${s(x.baseMaxGap!)} / ${s(x.baseP99Gap!)} / ${s(x.basePartitionMaxGap!)} / ${s(x.baseMaxLatency!)} |`,
      ),
      '',
    );
  }

  // Checks: stop the input; one output per input, and Java reads what kafkajs read.
  await steady.stop();
  const inputs = await withAdmin(async (a) =>
    (await a.fetchTopicOffsets(input)).reduce((t, p) => t + Number(p.high), 0),
  );
  await until('the output to hold every input', 300_000, () => r.count >= inputs).catch(() => 0);
  await sleep(3000);
  const checks = [
    `input ${inputs} records (${steady.errors()} failed sends), kafkajs read ${r.count} outputs`,
  ];
  let ok = r.count === inputs;
  if (o.java) {
    const j = await readCommittedWithJava(process.env.KAFKA_BROKERS!, output, { withValues: false });
    checks.push(`Java console consumer (read_committed) read ${j.length}`);
    ok &&= j.length === r.count;
  }
  checks.push(ok ? 'exact: one output per input' : 'NOT EXACT');
  note(checks.join('; '));

  const summary =
    o.scenario === 'restart'
      ? (['spawnToFirstNew', 'spawnToReady'] as const).map((k) => ({ k, ...stats(rows.map((x) => x[k]!)) }))
      : (['maxGap', 'p99Gap', 'partitionMaxGap', 'maxLatency'] as const).map((k) => ({
          k,
          ...stats(rows.map((x) => x[k]!)),
        }));
  const load1 = loadavg();
  const md = [
    `## ${o.scenario === 'restart' ? 'Restart (SIGKILL, respawn at once)' : `Rolling restart of ${o.workers} workers (SIGTERM)`}: ${o.keys.toLocaleString('en')} keys, code ${o.label}`,
    '',
    `- command: \`KAFKA_BROKERS=${process.env.KAFKA_BROKERS} node dist/bench/restart.js ${process.argv.slice(2).join(' ')}\``,
    `- code under test: ${o.code} at ${commitOf(o.code)}; ${new Date().toISOString()}; node ${process.version}, ${cpus().length} CPUs shared, load average ${load0[0]!.toFixed(1)} at start, ${load1[0]!.toFixed(1)} at end`,
    `- ${o.partitions} partitions, ${o.workers} worker(s), exactly_once, otherwise default settings; ${o.keys.toLocaleString('en')} keys loaded in ${loadSeconds.toFixed(1)} s, then ${o.rate} records/s`,
    `- checks: ${checks.join('; ')}`,
    '',
    ...lines,
    '',
    `Summary over ${rows.length} runs (median, min, max, seconds): ${summary.map((x) => `${x.k} ${s(x.median)} (${s(x.min)}–${s(x.max)})`).join('; ')}`,
    '',
  ].join('\n');
  process.stdout.write(`${md}\n`);
  process.stdout.write(
    `JSON ${JSON.stringify({ scenario: o.scenario, keys: o.keys, label: o.label, rows, summary, ok })}\n`,
  );
  if (o.write) {
    const file = join(here, 'bench/results', `restart-${new Date().toISOString().slice(0, 10)}.md`);
    if (!existsSync(file)) appendFileSync(file, '# Restart latency (bench/restart.ts)\n\n');
    appendFileSync(file, `${md}\n`);
    note(`appended to ${file}`);
  }
  return ok ? 0 : 1;
}

let dumpLogs: (() => void) | undefined;
const o = parseOptions(process.argv.slice(2));
const cleanups: Array<() => Promise<void>> = [];
let cleaning: Promise<void> | undefined;
const cleanup = () =>
  (cleaning ??= (async () => {
    for (const c of cleanups.reverse()) await c().catch((e) => note(`cleanup: ${(e as Error).message}`));
  })());
const bound = setTimeout(() => {
  note(`--timeout-min ${o.timeoutMin} passed: cleaning up`);
  void cleanup().then(() => process.exit(2));
}, o.timeoutMin * 60_000);
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.once(sig, () => {
    void cleanup().then(() => process.exit(130));
  });
main(o, cleanups).then(
  async (code) => {
    clearTimeout(bound);
    await cleanup();
    process.exit(code);
  },
  async (e) => {
    process.stderr.write(`${e?.stack ?? e}\n`);
    dumpLogs?.();
    await cleanup();
    process.exit(1);
  },
);
