/**
 * What the soaks share (bench/soak.ts on one broker, bench/cluster-soak.ts on a 3-node cluster):
 * their options, the timestamped event log, the worker slots of the running-sum job, the paced
 * input, the exact verifier and the result file. Each soak keeps its own chaos.
 */
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testKafka } from '../../test/helpers/kafka.js';
import { spawnWorker, type WorkerProcess } from '../../test/helpers/workers.js';
import { readCommittedWithJava } from '../java-reader.js';
import { root } from './procs.js';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface SoakOptions {
  minutes: number;
  rate: number;
  keys: number;
  every: number;
  kafkaPort: number;
  write: boolean;
}

/** `--minutes --rate --keys --every --kafka-port --no-write`, over `defaults`. */
export function parseSoakOptions(argv: string[], defaults: SoakOptions): SoakOptions {
  const o = { ...defaults };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const num = () => {
      const v = Number(argv[++i]);
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${flag} expects a positive number`);
      return v;
    };
    if (flag === '--minutes') o.minutes = num();
    else if (flag === '--rate') o.rate = num();
    else if (flag === '--keys') o.keys = Math.floor(num());
    else if (flag === '--every') o.every = num();
    else if (flag === '--kafka-port') o.kafkaPort = Math.floor(num());
    else if (flag === '--no-write') o.write = false;
    else throw new Error(`unknown option ${flag}`);
  }
  return o;
}

/** Lines `+<s>s <msg>` from the soak's start, to stderr as they come and kept for the result. */
export function eventLog(tag: string) {
  const t0 = Date.now();
  const lines: string[] = [];
  return {
    t0,
    lines,
    note(msg: string): void {
      const line = `+${((Date.now() - t0) / 1000).toFixed(0)}s ${msg}`;
      lines.push(line);
      process.stderr.write(`[${tag}] ${line}\n`);
    },
  };
}

/**
 * `n` slots of running-sum workers, each with a state folder of its own that outlives its
 * processes: `spawn(i)` starts slot i's worker (again), noting an exit nobody asked for.
 */
export function workerSlots(opts: {
  n: number;
  prefix: string;
  env: Record<string, string>;
  args: string[];
  note: (m: string) => void;
}) {
  const stateDirs = Array.from({ length: opts.n }, (_, i) =>
    mkdtempSync(join(tmpdir(), `sluice-${opts.prefix}-${i}-`)),
  );
  const workers: WorkerProcess[] = [];
  const spawn = (i: number): WorkerProcess => {
    const w = spawnWorker('running-sum', {
      name: `w${i}`,
      stateDir: stateDirs[i]!,
      env: opts.env,
      args: opts.args,
    });
    workers[i] = w;
    w.exited.then((c) => {
      if (c !== 'SIGKILL' && c !== 0 && c !== 'SIGTERM' && workers[i] === w)
        opts.note(`w${i} exited by itself (${c})`);
    });
    return w;
  };
  for (let i = 0; i < opts.n; i++) spawn(i);
  return {
    workers,
    stateDirs,
    spawn,
    /** Kills every worker (thawed first) and deletes the state folders. */
    async cleanup(): Promise<void> {
      for (const w of workers) w?.child.kill('SIGCONT');
      await Promise.all(workers.map((w) => w?.kill('SIGKILL')));
      for (const d of stateDirs) rmSync(d, { recursive: true, force: true });
    },
  };
}

/**
 * Paced input of the running-sum job (`{k, v, seq}` over `keys` keys, `rate` records/s in tenths
 * of a second) from an idempotent producer with long retries (a leader election takes seconds).
 * A failed send is tried again, up to 5 times, each with a new producer: kafkajs's idempotent
 * producer does not recover from some errors after a leader change (OUT_OF_ORDER_SEQUENCE_NUMBER
 * on every later send). A retried send that did land twice is one more input record: the verifier
 * takes its expectations from the input topic as stored. While `paused()` it sends nothing.
 */
export function pacedInput(opts: {
  topic: string;
  rate: number;
  keys: number;
  note: (m: string) => void;
  paused?: () => boolean;
}) {
  let producing = true;
  const state = { produced: 0, sendErrors: 0 };
  const newProducer = async () => {
    const made = testKafka().producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      retry: { retries: 40, initialRetryTime: 300, maxRetryTime: 3000 },
    });
    await made.connect();
    return made;
  };
  const done = (async () => {
    let p = await newProducer();
    const started = Date.now();
    let pausedFor = 0;
    let seq = 0;
    let rnd = 12345;
    const next = () => {
      rnd = (Math.imul(rnd, 1103515245) + 12345) >>> 0;
      return rnd / 4294967296;
    };
    while (producing) {
      if (opts.paused?.()) {
        await sleep(200);
        pausedFor += 200;
        continue;
      }
      const messages = [];
      for (let i = 0; i < Math.max(1, Math.floor(opts.rate / 10)); i++) {
        const k = `k${Math.floor(next() * opts.keys)}`;
        messages.push({ key: k, value: JSON.stringify({ k, v: 1 + Math.floor(next() * 9), seq: seq++ }) });
      }
      for (let attempt = 1; attempt <= 5; attempt++) {
        try {
          await p.send({ topic: opts.topic, acks: -1, messages });
          state.produced += messages.length;
          break;
        } catch (e) {
          state.sendErrors++;
          opts.note(`input send failed (${(e as Error).message}); retrying with a new producer`);
          await p.disconnect().catch(() => undefined);
          await sleep(1000);
          p = await newProducer().catch(() => p);
        }
      }
      const due = started + pausedFor + (state.produced / opts.rate) * 1000;
      if (due > Date.now()) await sleep(due - Date.now());
    }
    await p.disconnect().catch(() => undefined);
  })();
  return {
    state,
    /** Stops the input and resolves once the last send settled. */
    async stop(): Promise<void> {
      producing = false;
      await done;
    },
  };
}

/** The value at quantile q of sorted numbers. */
export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

export interface Verdict {
  exact: boolean;
  inputs: number;
  outputs: number;
  keys: number;
  /** Per key that differs: how many outputs for how many inputs, and where they first differ. */
  problems: string[];
  /** Seconds from the call until the output held as many records as the input (or it gave up). */
  catchUpS: number;
}

/**
 * The exact verifier: reads the input and the output with Kafka's own console consumer
 * (read_committed), the output again every 5 s until it holds as many records as the input (at
 * most `catchUpMs`); per key, the output must be exactly the running sums of its input, in order.
 */
export async function verifyRunningSums(
  brokers: string,
  input: string,
  output: string,
  catchUpMs: number,
): Promise<Verdict> {
  const from = Date.now();
  const inRecords = await readCommittedWithJava(brokers, input, { withValues: true });
  inRecords.sort((a, b) => a.partition - b.partition || a.offset - b.offset);
  const expected = new Map<string, number[]>();
  for (const r of inRecords) {
    const v = JSON.parse(r.value) as { k: string; v: number };
    let l = expected.get(v.k);
    if (!l) expected.set(v.k, (l = []));
    l.push((l[l.length - 1] ?? 0) + v.v);
  }
  let out = await readCommittedWithJava(brokers, output, { withValues: true });
  while (out.length < inRecords.length && Date.now() - from < catchUpMs) {
    await sleep(5000);
    out = await readCommittedWithJava(brokers, output, { withValues: true });
  }
  const catchUpS = (Date.now() - from) / 1000;
  out.sort((a, b) => a.partition - b.partition || a.offset - b.offset);
  const got = new Map<string, number[]>();
  for (const r of out) {
    const v = JSON.parse(r.value) as { k: string; sum: number };
    let l = got.get(v.k);
    if (!l) got.set(v.k, (l = []));
    l.push(v.sum);
  }
  const problems: string[] = [];
  // Where the output is short at the end of a key (a task behind, or a transaction the reader
  // cannot see past) versus where it differs (lost or repeated records), by output partition.
  const partitionOf = new Map<string, number>();
  for (const r of out) partitionOf.set((JSON.parse(r.value) as { k: string }).k, r.partition);
  const short = new Map<number, number>();
  const differ = new Map<number, number>();
  for (const [k, sums] of expected) {
    const g = got.get(k) ?? [];
    if (g.length !== sums.length || g.some((x, i) => x !== sums[i])) {
      const i = g.findIndex((x, j) => x !== sums[j]);
      problems.push(`key ${k}: ${g.length} outputs for ${sums.length} inputs, first difference at #${i}`);
      const at = partitionOf.get(k) ?? -1;
      const m = i === -1 && g.length < sums.length ? short : differ;
      m.set(at, (m.get(at) ?? 0) + 1);
    }
  }
  for (const k of got.keys()) if (!expected.has(k)) problems.push(`key ${k}: output without input`);
  const byPartition = (m: Map<number, number>) =>
    [...m]
      .sort((a, b) => a[0] - b[0])
      .map(([p, n]) => `${p}:${n}`)
      .join(' ') || 'none';
  if (problems.length > 0)
    problems.unshift(
      `keys whose output is a correct but short prefix, by output partition: ${byPartition(short)}; keys whose output differs (lost, repeated or wrong sums): ${byPartition(differ)}`,
    );
  return {
    exact: problems.length === 0 && out.length === inRecords.length,
    inputs: inRecords.length,
    outputs: out.length,
    keys: expected.size,
    problems,
    catchUpS,
  };
}

/** The verifier's line for the event log. */
export function verdictLine(v: Verdict): string {
  return `verifier: ${v.inputs} input records, ${v.outputs} output records, ${v.keys} keys: ${v.exact ? 'EXACT' : `NOT EXACT (${v.problems.length} keys differ)`}`;
}

/** The verifier's bullet for the result. */
export function verdictBullet(v: Verdict): string {
  return `- verifier (Kafka's console consumer, read_committed): ${v.exact ? 'every key’s output is exactly its running sums, in order, once' : v.problems.slice(0, 10).join('; ')}`;
}

/**
 * Prints the result, and unless `write` is off appends it to bench/results/<name>-<date>.md
 * (started with `title` when new). When it is not exact, the workers' last own log lines follow
 * on stderr.
 */
export function report(opts: {
  name: string;
  title: string;
  md: string;
  write: boolean;
  exact: boolean;
  workers: ReadonlyArray<WorkerProcess | undefined>;
}): void {
  process.stdout.write(`${opts.md}\n`);
  if (opts.write) {
    const dir = join(root, 'bench/results');
    if (!existsSync(dir)) mkdirSync(dir, { recursive: true });
    const file = join(dir, `${opts.name}-${new Date().toISOString().slice(0, 10)}.md`);
    if (!existsSync(file)) appendFileSync(file, `# ${opts.title}\n\n`);
    appendFileSync(file, `${opts.md}\n`);
    process.stderr.write(`written to ${file}\n`);
  }
  if (!opts.exact)
    for (const w of opts.workers)
      if (w)
        process.stderr.write(
          `--- ${w.name}\n${w.logs
            .filter((l) => !l.includes('"component":"kafkajs"'))
            .slice(-30)
            .join('\n')}\n`,
        );
}

/** Runs a soak's main and exits with its code (1 on a thrown error). */
export function runSoak(main: () => Promise<number>): void {
  main().then(
    (code) => process.exit(code),
    (e) => {
      process.stderr.write(`${e?.stack ?? e}\n`);
      process.exit(1);
    },
  );
}
