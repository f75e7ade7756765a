import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config/load.js';
import type { SluiceConfig, SluiceConfigInput } from '../../src/config/schema.js';
import { App, type RunningWorker, startWorker } from '../../src/index.js';
import { brokers, deleteTopicsMatching, jobTopics, withAdmin } from './kafka.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const SLUICE_BIN = join(root, 'bin/sluice.js');
/** Compiled test job files live in dist/test/fixtures/jobs; a path (with a slash) is kept. */
export function jobPath(name: string): string {
  return name.includes('/') ? name : join(root, 'dist/test/fixtures/jobs', `${name}.js`);
}

/** A compiled file under dist/ (e.g. `examples/clicks.js`). */
export function distPath(file: string): string {
  return join(root, 'dist', file);
}

export interface WorkerProcess {
  readonly child: ChildProcess;
  readonly name: string;
  /** The worker's HTTP base URL, once it printed it. */
  url(): Promise<string>;
  /** The last lines it logged (at most 5000: older ones are dropped, 1000 at a time). */
  readonly logs: string[];
  /** A position in its log that stays valid when old lines are dropped (for `logsSince`). */
  logMark(): number;
  /** The lines logged since `logMark()` returned `mark` (those still kept). */
  logsSince(mark: number): string[];
  /** Resolves with the exit code (or signal name). */
  readonly exited: Promise<number | string>;
  kill(signal?: NodeJS.Signals): Promise<number | string>;
  metrics(): Promise<string>;
  status(): Promise<any>;
}

/**
 * Starts `sluice run <job>` (or `sluice dev <job>`) as a real process (for crash tests: SIGKILL
 * is a real crash). Logs are JSON on stdout; the HTTP port is chosen by the OS and read from the log.
 */
export function spawnWorker(
  job: string,
  opts: {
    name?: string;
    env?: Record<string, string>;
    args?: string[];
    stateDir?: string;
    /** A command line that runs the worker's command line given as its last arguments (e.g. unshare). */
    wrap?: string[];
    /** Default `run`. */
    command?: 'run' | 'dev';
  } = {},
): WorkerProcess {
  const name = opts.name ?? 'worker';
  const stateDir = opts.stateDir ?? mkdtempSync(join(tmpdir(), 'sluice-state-'));
  const wrap = opts.wrap ?? [];
  // TEST_WORKER_LOGS=<folder>: every line of every worker, to read after a failed fault run (the
  // in-memory log keeps only the last 5000 lines). Made before the worker starts: a folder missing
  // made the first line's append throw in the output handler, which failed the test and left its
  // workers running (unkilled, they kept consuming CPU).
  const logDir = process.env.TEST_WORKER_LOGS;
  if (logDir) mkdirSync(logDir, { recursive: true });
  const child = spawn(
    wrap[0] ?? process.execPath,
    [
      ...(wrap.length > 0 ? [...wrap.slice(1), process.execPath] : []),
      SLUICE_BIN,
      opts.command ?? 'run',
      jobPath(job),
      '--http-port',
      '0',
      '--state-dir',
      stateDir,
      '--log-format',
      'json',
      ...(opts.args ?? []),
    ],
    {
      env: { ...process.env, KAFKA_BROKERS: brokers().join(','), ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const logs: string[] = [];
  let resolveUrl: (u: string) => void = () => undefined;
  const urlP = new Promise<string>((r) => {
    resolveUrl = r;
  });
  let buf = '';
  let dropped = 0;
  let logFile = logDir ? join(logDir, `${name}-${child.pid}.log`) : undefined;
  const onData = (d: Buffer) => {
    if (logFile) {
      try {
        appendFileSync(logFile, d);
      } catch (e) {
        // A copy for reading later: losing it must not fail the test, nor leave the worker running.
        process.stderr.write(
          `TEST_WORKER_LOGS: cannot write ${logFile} (${(e as Error).message}); not logging to it\n`,
        );
        logFile = undefined;
      }
    }
    buf += d.toString();
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      logs.push(line);
      if (logs.length > 5000) {
        logs.splice(0, 1000);
        dropped += 1000;
      }
      const m = /metrics at (http:\/\/[^/\s"]+)\/metrics/.exec(line);
      if (m) resolveUrl(m[1]!);
    }
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<number | string>((r) => child.once('exit', (code, sig) => r(code ?? sig ?? -1)));
  const w: WorkerProcess = {
    child,
    name,
    logs,
    logMark: () => dropped + logs.length,
    logsSince: (mark) => logs.slice(Math.max(0, mark - dropped)),
    exited,
    url: () =>
      Promise.race([
        urlP,
        exited.then((c) => {
          throw new Error(`${name} exited (${c}) before serving HTTP:\n${logs.slice(-30).join('\n')}`);
        }),
      ]),
    async kill(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
    // A bounded wait: a worker that accepts but never answers fails the poll instead of hanging
    // the test for fetch's own 300 s header timeout.
    async metrics() {
      return (await fetch(`${await w.url()}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
    },
    async status() {
      return (await fetch(`${await w.url()}/status`, { signal: AbortSignal.timeout(10_000) })).json();
    },
  };
  return w;
}

/** The value of one sample of a Prometheus text exposition, or undefined. */
export function metricValue(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const ls = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => ls[k] === v)) return Number(m[3]);
  }
  return undefined;
}

/** Sum of all samples of a metric whose labels match. */
export function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const ls = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => ls[k] === v)) sum += Number(m[3]);
  }
  return sum;
}

/**
 * Whether the worker is running and every task it owns is running (restored), per its /status;
 * with `tasks`, also that it owns exactly that many.
 */
export async function allTasksRunning(w: WorkerProcess, tasks?: number): Promise<boolean> {
  const s = await w.status();
  return (
    s.state === 'running' &&
    s.tasks.length > 0 &&
    (tasks === undefined || s.tasks.length === tasks) &&
    s.tasks.every((t: any) => t.state === 'running')
  );
}

/**
 * The worker processes of one test: killed, and the topics named `<id>…` deleted, when the test
 * ends. `step` times each step in the test's diagnostics and prints every worker's last log lines
 * when a step fails.
 */
export function workerGroup(t: TestContext, id: string) {
  const live: WorkerProcess[] = [];
  t.after(async () => {
    await Promise.all(live.map((w) => w.kill('SIGKILL')));
    await deleteTopicsMatching(id);
  });
  const t0 = Date.now();
  return {
    add(w: WorkerProcess): WorkerProcess {
      live.push(w);
      return w;
    },
    async step<T>(what: string, fn: () => Promise<T>): Promise<T> {
      const s0 = Date.now();
      try {
        const r = await fn();
        t.diagnostic(`${what}: ${Date.now() - s0} ms (at ${Date.now() - t0} ms)`);
        return r;
      } catch (e) {
        for (const w of live) console.error(`--- ${w.name} ---\n${w.logs.slice(-30).join('\n')}`);
        throw new Error(`${what} failed after ${Date.now() - s0} ms: ${(e as Error).message}`, { cause: e });
      }
    },
  };
}

/**
 * The configuration of an in-process worker (`startWorker`) for a test: the suite's broker, no
 * HTTP server, JSON logs at `level`, a fresh state folder, and the test's `processing` settings.
 */
function inProcessConfig(
  level: 'silent' | 'warn' | 'info',
  processing?: SluiceConfigInput['processing'],
): SluiceConfig {
  return loadConfig({
    env: { KAFKA_BROKERS: process.env.KAFKA_BROKERS },
    overrides: {
      ...(processing ? { processing } : {}),
      http: { enabled: false },
      log: { level, format: 'json' },
      state: { dir: mkdtempSync(join(tmpdir(), 'sluice-')) },
    },
  });
}

/**
 * An app for an in-process worker of a test, with fresh topics (`jobTopics`): build the topology
 * on `app`, then `start()` the worker. The test's cleanup stops the worker, then deletes the
 * topics, in this order: topics deleted under a running worker kept a kafkajs metadata retry (and
 * its socket) alive after stop(), and the test file never exited.
 */
export async function inProcessApp(t: TestContext, prefix: string, partitions: number) {
  const topics = await jobTopics(prefix, partitions);
  const app = new App({ id: topics.id });
  let w: RunningWorker | undefined;
  t.after(async () => {
    await w?.stop();
    await deleteTopicsMatching(topics.id);
  });
  const start = async (
    level: 'silent' | 'warn' | 'info' = 'warn',
    processing?: SluiceConfigInput['processing'],
  ) => (w = await startWorker(app, inProcessConfig(level, processing)));
  return { ...topics, app, start };
}

/**
 * The flags of a worker under test that runs exactly-once with a short session: heartbeats every
 * second, and info logs (the helpers read its HTTP address and its assignments from them).
 */
export function exactlyOnceArgs(sessionTimeoutMs: number): string[] {
  return [
    '--processing.guarantee',
    'exactly_once',
    '--kafka.sessionTimeoutMs',
    String(sessionTimeoutMs),
    '--kafka.heartbeatIntervalMs',
    '1000',
    '--log-level',
    'info',
  ];
}

/**
 * `n` workers of `job` in `group`, named w0, w1, …, each on a fresh state folder `sluice-<prefix>-<i>-…`,
 * with `env` (or `envOf(i)`, for a worker that must see other brokers) and `args`.
 */
export function spawnWorkers(
  group: { add(w: WorkerProcess): WorkerProcess },
  n: number,
  opts: {
    job?: string;
    prefix: string;
    env: Record<string, string>;
    args: string[];
    envOf?: (i: number) => Record<string, string>;
  },
): WorkerProcess[] {
  return Array.from({ length: n }, (_, i) =>
    group.add(
      spawnWorker(opts.job ?? 'running-sum', {
        name: `w${i}`,
        stateDir: mkdtempSync(join(tmpdir(), `sluice-${opts.prefix}-${i}-`)),
        env: opts.envOf?.(i) ?? opts.env,
        args: opts.args,
      }),
    ),
  );
}

/** The lines of a worker's log that are its own (not kafkajs's), for a failing test's output. */
export function ownLogs(w: WorkerProcess, lines = 40): string[] {
  return w.logs.filter((l) => !l.includes('"component":"kafkajs"')).slice(-lines);
}

/**
 * Where a short output stands, for a failing test's diagnostics: the group's committed offsets
 * against the end offsets of every topic of the app it committed on (inputs and repartition
 * topics; committed to the end with outputs short says results were lost, behind says a stall),
 * and each worker's tasks from its /status (a task stuck restoring holds its partitions).
 */
export async function diagnoseGroup(
  t: TestContext,
  groupId: string,
  workers: readonly (WorkerProcess | undefined)[],
): Promise<void> {
  try {
    await withAdmin(async (admin) => {
      const topics = (await admin.listTopics()).filter((x) => x.startsWith(groupId)).sort();
      const committed = await admin.fetchOffsets({ groupId, topics });
      for (const c of committed) {
        if (c.partitions.every((p) => p.offset === '-1')) continue;
        const ends = await admin.fetchTopicOffsets(c.topic);
        const at = new Map(c.partitions.map((p) => [p.partition, p.offset]));
        const parts = ends
          .sort((x, y) => x.partition - y.partition)
          .map((e) => `${e.partition}: ${at.get(e.partition) ?? 'none'} of ${e.high}`);
        t.diagnostic(`${c.topic}: committed of end offset per partition ${parts.join(', ')}`);
      }
    });
  } catch (e) {
    t.diagnostic(`committed offsets of ${groupId} unreadable: ${String(e)}`);
  }
  for (const w of workers) {
    if (!w) continue;
    const tasks =
      w.child.exitCode !== null
        ? `exited ${w.child.exitCode}`
        : await w
            .status()
            .then((st) => JSON.stringify(st.tasks))
            .catch((e: unknown) => `status unreadable: ${String(e)}`);
    t.diagnostic(`${w.name} tasks: ${tasks}`);
  }
}

/** Prints each worker's last own log lines to stderr (a failing test's diagnostics). */
export function dumpWorkerLogs(workers: readonly WorkerProcess[], lines = 40): void {
  for (const w of workers) console.error(`--- ${w.name} ---\n${ownLogs(w, lines).join('\n')}`);
}

/** Whether an assignment log line gives the worker tasks it did not have. */
export const addsTasks = (line: string): boolean =>
  line.includes('"msg":"assignment"') && !line.includes('"added":[]');

/** The task ids a worker owns, per its /status. */
export async function ownedTasks(w: WorkerProcess): Promise<string[]> {
  return ((await w.status()).tasks as Array<{ id: string }>).map((t) => t.id);
}

/**
 * Waits until the group `groupId` is settled: the coordinator says Stable with one member per
 * worker, every worker runs all of its tasks, and no worker was assigned anything for `quietMs`.
 * A fault injected during a rebalance tests something else: a member cut off while the group
 * waits for it to rejoin is dropped only at the rebalance timeout, not at its session timeout.
 * Returns what changed when on the way, for the diagnostics.
 */
export async function waitForStableGroup(
  groupId: string,
  workers: readonly WorkerProcess[],
  opts: { quietMs?: number; timeoutMs?: number } = {},
): Promise<string> {
  const { quietMs = 4000, timeoutMs = 120_000 } = opts;
  const t0 = Date.now();
  let quietFrom = Date.now();
  let marks = workers.map((w) => w.logMark());
  // What changed when, for the diagnostics (a slow settle says what held it up).
  const changes: string[] = [];
  let seen = '';
  for (;;) {
    const assigned = workers.filter((w, i) =>
      w.logsSince(marks[i]!).some((l) => l.includes('"msg":"assignment"')),
    );
    if (assigned.length > 0) {
      quietFrom = Date.now();
      marks = workers.map((w) => w.logMark());
      changes.push(`${Date.now() - t0} ms: assignment of ${assigned.map((w) => w.name).join(',')}`);
    }
    const state = await withAdmin(async (a) => (await a.describeGroups([groupId])).groups[0]).catch(
      () => undefined,
    );
    // Per worker: ok, or what is not running (its state, its tasks that are not, or the error).
    const views = await Promise.all(
      workers.map(async (w) => {
        try {
          const s = await w.status();
          const not = (s.tasks as Array<{ id: string; state: string }>).filter((x) => x.state !== 'running');
          if (s.state === 'running' && s.tasks.length > 0 && not.length === 0) return 'ok';
          return `${s.state}${s.tasks.length === 0 ? ' no tasks' : ''} ${not.map((x) => `${x.id}:${x.state}`).join(' ')}`.trim();
        } catch (e) {
          return `status failed: ${(e as Error).message}`;
        }
      }),
    );
    const running = views.map((v) => v === 'ok');
    const now = `group ${state?.state ?? '?'} with ${state?.members.length ?? '?'} members, workers: ${views.join(', ')}`;
    if (now !== seen) changes.push(`${Date.now() - t0} ms: ${now}`);
    seen = now;
    const settled =
      state?.state === 'Stable' && state.members.length === workers.length && running.every(Boolean);
    if (!settled) quietFrom = Date.now();
    else if (Date.now() - quietFrom >= quietMs) return changes.join('; ');
    if (Date.now() - t0 > timeoutMs)
      throw new Error(`group not settled after ${timeoutMs} ms: ${changes.join('; ')}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}
