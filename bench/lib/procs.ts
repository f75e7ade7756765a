/**
 * The processes under test: a Sluice worker (`sluice run dist/bench/jobs/<job>.js`), the Kafka
 * Streams peer (`java -jar bench/peers/kafka-streams/target/kafka-streams-peer.jar`) and the
 * decode-only client ceilings (`<node> dist/bench/ceiling*.js`, bench/lib/ceilings.ts), each a
 * direct child so /proc/<pid> is its own.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../src/dev/broker-process.js';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const PEER_DIR = join(root, 'bench/peers/kafka-streams');
export const PEER_JAR = join(PEER_DIR, 'target/kafka-streams-peer.jar');
const SLUICE_BIN = join(root, 'bin/sluice.js');

export type SystemName = 'sluice' | 'kafka-streams' | 'ceiling';
export type Guarantee = 'exactly_once' | 'at_least_once';
/** Kafka Streams name of the workload in BenchApp.java, Sluice job file in dist/bench/jobs. */
export type JobKind = 'map-filter' | 'enrich' | 'count' | 'running-sum' | 'window' | 'join';
const SLUICE_JOB: Record<JobKind, string> = {
  'map-filter': 'map-filter',
  enrich: 'enrich',
  count: 'keyed-count',
  'running-sum': 'running-sum',
  window: 'window-count',
  join: 'join',
};

export function sluiceJobPath(kind: JobKind): string {
  return join(root, 'dist/bench/jobs', `${SLUICE_JOB[kind]}.js`);
}

/** Both systems' consumers leave the group after this long without a heartbeat (recovery). */
export const SESSION_TIMEOUT_MS = 10_000;
export const COMMIT_INTERVAL_MS = 100;
const CLK_TCK = 100; // `getconf CLK_TCK` on Linux x86-64

export interface RunSpec {
  system: SystemName;
  kind: JobKind;
  appId: string;
  input: string;
  output: string;
  table?: string;
  guarantee: Guarantee;
  stateDir: string;
  brokers: string;
  /** ceiling only: how many records to decode before reporting */
  records?: number;
  /** The record cache bound of both systems: Kafka Streams' statestore.cache.max.bytes, Sluice's
   * state.recordCacheMaxBytes (0 = no record cache, every update emitted) */
  ksCacheBytes?: number;
  /** Stream threads of the one process: Kafka Streams' num.stream.threads, Sluice's
   * processing.threads (default 1; bench/scaling.ts and `bench.mjs --threads N` set more) */
  threads?: number;
  /** Sluice only: another checkout's root (its bin/sluice.js and dist/bench/jobs; bench/cpu.ts --base) */
  sluiceRoot?: string;
  /** Sluice only: node options before the script (e.g. --cpu-prof) */
  nodeArgs?: string[];
  /** ceiling only: the node binary, the script and extra environment */
  ceiling?: { node: string; script: string; env?: Record<string, string> };
}

export interface Proc {
  child: ChildProcess;
  pid: number;
  logs: string[];
  exited: Promise<number | string>;
  /** resolves when the system says it is running (Sluice /readyz, Kafka Streams RUNNING) */
  ready(timeoutMs: number): Promise<void>;
  kill(signal: NodeJS.Signals): Promise<number | string>;
  /** ceiling only: the lines it printed (READY, FIRST <ms>, P10 <ms>, P90 <ms>, DONE <ms> <n>) */
  lines: string[];
  /** Sluice only: its /metrics URL */
  metricsUrl?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function cleanEnv(): NodeJS.ProcessEnv {
  // SLUICE_* would change the measured configuration (and unknown ones are rejected).
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SLUICE_')) env[k] = v;
  return env;
}

/** Live children, killed when the driver exits however it exits (a crash must not leave them running). */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

export async function startProc(s: RunSpec): Promise<Proc> {
  const env = cleanEnv();
  Object.assign(env, {
    KAFKA_BROKERS: s.brokers,
    BENCH_BROKERS: s.brokers,
    BENCH_WORKLOAD: s.kind,
    BENCH_APP_ID: s.appId,
    BENCH_INPUT: s.input,
    BENCH_OUTPUT: s.output,
    BENCH_TABLE: s.table ?? '',
    BENCH_GUARANTEE: s.guarantee,
    BENCH_STATE_DIR: s.stateDir,
    BENCH_COMMIT_INTERVAL_MS: String(COMMIT_INTERVAL_MS),
    BENCH_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
    BENCH_RECORDS: String(s.records ?? 0),
    BENCH_KS_CACHE_BYTES: String(s.ksCacheBytes ?? 0),
    BENCH_KS_THREADS: String(s.threads ?? 1),
    ...s.ceiling?.env,
  });
  let cmd: string;
  let args: string[];
  let httpPort = 0;
  if (s.system === 'sluice') {
    httpPort = await freePort();
    cmd = process.execPath;
    args = [
      ...(s.nodeArgs ?? []),
      // SLUICE_BENCH_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/p': for any bench's Sluice workers.
      ...(process.env.SLUICE_BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean),
      s.sluiceRoot ? join(s.sluiceRoot, 'bin/sluice.js') : SLUICE_BIN,
      'run',
      s.sluiceRoot
        ? join(s.sluiceRoot, 'dist/bench/jobs', `${SLUICE_JOB[s.kind]}.js`)
        : sluiceJobPath(s.kind),
      '--http-port',
      String(httpPort),
      '--log-level',
      'warn',
      '--log-format',
      'json',
      '--state-dir',
      s.stateDir,
      '--processing.guarantee',
      s.guarantee,
      '--processing.commitIntervalMs',
      String(COMMIT_INTERVAL_MS),
      '--kafka.sessionTimeoutMs',
      String(SESSION_TIMEOUT_MS),
      // The same record cache bound as Kafka Streams' statestore.cache.max.bytes: 0 on both sides
      // (every update an output), or equal bounds (a cached comparison).
      '--state.recordCacheMaxBytes',
      String(s.ksCacheBytes ?? 0),
      ...(s.threads && s.threads > 1 ? ['--processing.threads', String(s.threads)] : []),
      // SLUICE_BENCH_WORKER_ARGS='--kafka.lingerMs 50': settings for any bench's Sluice workers.
      ...(process.env.SLUICE_BENCH_WORKER_ARGS ?? '').split(' ').filter(Boolean),
    ];
  } else if (s.system === 'kafka-streams') {
    cmd = 'java';
    // A fixed heap so the JVM does not size itself from the host's RAM.
    args = ['-Xms256m', '-Xmx1g', '-XX:+UseParallelGC', '-jar', PEER_JAR];
  } else {
    if (!s.ceiling) throw new Error('a ceiling run needs its node and script');
    cmd = s.ceiling.node;
    args = [s.ceiling.script];
  }
  const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: string[] = [];
  // SLUICE_BENCH_LOGS=file: every line of every process, to read after the run.
  const tee = process.env.SLUICE_BENCH_LOGS;
  const lines: string[] = [];
  let running = false;
  const onData = (d: Buffer) => {
    for (const line of d.toString().split('\n')) {
      if (!line) continue;
      logs.push(line);
      if (tee) appendFileSync(tee, `${line}\n`);
      if (line === 'STATE RUNNING') running = true;
      if (line.startsWith('STATE ') && line !== 'STATE RUNNING') running = false;
      if (/^(FIRST|DONE|P10|P90) /.test(line) || line === 'READY') lines.push(line);
    }
    if (logs.length > 500) logs.splice(0, logs.length - 200);
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  live.add(child);
  const exited = new Promise<number | string>((r) =>
    child.once('exit', (code, sig) => {
      live.delete(child);
      r(code ?? sig ?? -1);
    }),
  );
  let dead: number | string | undefined;
  void exited.then((c) => {
    dead = c;
  });
  return {
    child,
    pid: child.pid!,
    logs,
    lines,
    exited,
    ...(httpPort ? { metricsUrl: `http://127.0.0.1:${httpPort}/metrics` } : {}),
    async ready(timeoutMs) {
      const t0 = Date.now();
      for (;;) {
        if (dead !== undefined)
          throw new Error(`${s.system} exited (${dead}):\n${logs.slice(-30).join('\n')}`);
        if (Date.now() - t0 > timeoutMs)
          throw new Error(`${s.system} not ready after ${timeoutMs} ms:\n${logs.slice(-30).join('\n')}`);
        if (s.system === 'sluice') {
          try {
            const r = await fetch(`http://127.0.0.1:${httpPort}/readyz`, {
              signal: AbortSignal.timeout(2000),
            });
            if (r.status === 200) return;
          } catch {
            // not listening yet
          }
        } else if (s.system === 'kafka-streams') {
          if (running) return;
        } else if (lines.includes('READY')) return;
        await sleep(100);
      }
    },
    async kill(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** CPU seconds (user + system) and peak RSS of a live process, from /proc. */
/**
 * CPU seconds (utime + stime) of a process's main thread alone (/proc/<pid>/task/<pid>/stat):
 * for a Node.js worker, the JavaScript thread, which bounds its rate; the libuv pool, V8's
 * helpers and RocksDB's background threads are left out.
 */
export function mainThreadSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / CLK_TCK;
  } catch {
    return Number.NaN;
  }
}

export function procStats(pid: number): { cpuSeconds: number; hwmBytes: number } {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command (which may hold spaces) start after the last ')'.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const cpuSeconds = (Number(f[11]) + Number(f[12])) / CLK_TCK; // utime, stime (fields 14, 15)
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /VmHWM:\s+(\d+) kB/.exec(status);
    return { cpuSeconds, hwmBytes: m ? Number(m[1]) * 1024 : Number.NaN };
  } catch {
    return { cpuSeconds: Number.NaN, hwmBytes: Number.NaN };
  }
}
