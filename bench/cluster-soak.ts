/**
 * Rolling-restart soak on a local 3-node cluster (issue 18, item 4): the running-sum job under
 * exactly-once on 3 static-member workers while, over and over, in this cycle:
 *
 * - `worker-restart`: a rolling restart of the workers, one at a time (SIGTERM, start again on
 *   the same state folder at once: static membership keeps its tasks; the next one once it is ready),
 * - `worker-kill`: SIGKILL a worker, start it again 2 s later,
 * - `worker-pause`: SIGSTOP a worker past its session timeout (10 s; 14 s stopped), then SIGCONT,
 * - `broker-restart`: a rolling restart of the 3 brokers, one at a time (SIGTERM: controlled
 *   shutdown; start again; the next one once no partition is under-replicated),
 * - `broker-kill`: SIGKILL the broker leading the most partitions, start it again 10 s later.
 *
 * Input is paced (--rate records/s, default 300) for --minutes (default 30); then the workers
 * catch up and an exact verifier reads input and output with Kafka's own console consumer
 * (read_committed): per key, the output must be exactly the running sums of its input, in order.
 * Output gaps: a read_committed reader notes when each output partition receives records; for each
 * event, the gaps between arrivals on every partition from the event's start to the next event's
 * start are its gaps; p99 and max are reported per kind, with the quiet stretches before the first
 * event as the baseline.
 *
 *   npx tsc -p . && node dist/bench/cluster-soak.js [--minutes 30] [--rate 300] [--keys 1000]
 *     [--every 20] [--kafka-port 39800] [--no-write]
 *
 * The result is printed and appended to bench/results/cluster-soak-<YYYY-MM-DD>.md; exit code 1
 * when the output is not exact.
 */
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { signalGroup, waitForExit } from '../src/dev/broker-process.js';
import { type LocalKafka, startLocalKafka, stopLocalKafka } from '../src/dev/local-kafka.js';
import { readCommittedWithJava } from './java-reader.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const SESSION_MS = 10_000;

interface Options {
  minutes: number;
  rate: number;
  keys: number;
  every: number;
  kafkaPort: number;
  write: boolean;
}

function parseOptions(argv: string[]): Options {
  const o: Options = { minutes: 30, rate: 300, keys: 1000, every: 20, kafkaPort: 39800, write: true };
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

const t0 = Date.now();
const elapsed = () => ((Date.now() - t0) / 1000).toFixed(0);
const log: string[] = [];
function note(msg: string): void {
  const line = `+${elapsed()}s ${msg}`;
  log.push(line);
  process.stderr.write(`[cluster-soak] ${line}\n`);
}

type Kind = 'worker-restart' | 'worker-kill' | 'worker-pause' | 'broker-restart' | 'broker-kill';
const CYCLE: Kind[] = ['worker-restart', 'worker-kill', 'broker-restart', 'worker-pause', 'broker-kill'];

/** The value at quantile q of sorted numbers. */
function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

async function main(): Promise<number> {
  const o = parseOptions(process.argv.slice(2));
  const dataDir = mkdtempSync(join(tmpdir(), 'sluice-cluster-soak-'));
  const launcherEnv = { ...process.env, KAFKA_BROKERS: '' };
  let kafka: LocalKafka;
  const startCluster = async () => {
    kafka = await startLocalKafka({
      brokers: 3,
      port: o.kafkaPort,
      dataDir,
      env: launcherEnv,
      heapMb: 512,
      log: (m) => note(m),
    });
    process.env.KAFKA_BROKERS = kafka.brokers.join(',');
  };
  await startCluster();
  // The helpers read KAFKA_BROKERS when first used: import them only now.
  const { jobTopics, testKafka, uniqueName, withAdmin } = await import('../test/helpers/kafka.js');
  const { spawnWorker, allTasksRunning } = await import('../test/helpers/workers.js');
  type W = ReturnType<typeof spawnWorker>;
  const stateDirs: string[] = [];
  const workers: W[] = [];
  let exitCode = 1;
  const arrivals = new Map<number, number[]>();
  const clock = testKafka().consumer({ groupId: uniqueName('soak-clock'), maxWaitTimeInMs: 100 });
  try {
    const { input, output, env } = await jobTopics('cluster-soak', 6);
    const args = [
      '--processing.guarantee',
      'exactly_once',
      // info: the helpers read the worker's HTTP address from its start-up line.
      '--log-level',
      'info',
      '--kafka.sessionTimeoutMs',
      String(SESSION_MS),
      '--kafka.heartbeatIntervalMs',
      '1000',
    ];
    const spawn = (i: number) => {
      const w = spawnWorker('running-sum', { name: `w${i}`, stateDir: stateDirs[i]!, env, args });
      workers[i] = w;
      w.exited.then((c) => {
        if (c !== 'SIGKILL' && c !== 0 && c !== 'SIGTERM' && workers[i] === w)
          note(`w${i} exited by itself (${c})`);
      });
    };
    const ready = async (i: number, timeoutMs = 120_000) => {
      const until = Date.now() + timeoutMs;
      while (Date.now() < until) {
        if (await allTasksRunning(workers[i]!).catch(() => false)) return true;
        await sleep(250);
      }
      note(`w${i} not ready after ${timeoutMs} ms`);
      return false;
    };
    for (let i = 0; i < 3; i++) {
      stateDirs.push(mkdtempSync(join(tmpdir(), `sluice-cluster-soak-${i}-`)));
      spawn(i);
    }
    await clock.connect();
    await clock.subscribe({ topic: output, fromBeginning: true });
    await clock.run({
      eachBatch: async ({ batch }) => {
        if (batch.messages.length === 0) return;
        let l = arrivals.get(batch.partition);
        if (!l) arrivals.set(batch.partition, (l = []));
        l.push(Date.now());
      },
    });
    note(
      `cluster at ${kafka!.brokers.join(',')}, 3 workers, ${o.rate} records/s over ${o.keys} keys, ${o.minutes} min`,
    );

    // Paced idempotent producer with long retries (a leader election takes seconds). The verifier
    // takes its expectations from the input topic as stored, so a send retried by hand that did
    // land twice is one more input record, not a false alarm.
    let producing = true;
    let produced = 0;
    let sendErrors = 0;
    let seq = 0;
    const producerDone = (async () => {
      const newProducer = async () => {
        const made = testKafka().producer({
          idempotent: true,
          maxInFlightRequests: 1,
          retry: { retries: 40, initialRetryTime: 300, maxRetryTime: 3000 },
        });
        await made.connect();
        return made;
      };
      let p = await newProducer();
      const started = Date.now();
      let rnd = 12345;
      const next = () => {
        rnd = (Math.imul(rnd, 1103515245) + 12345) >>> 0;
        return rnd / 4294967296;
      };
      while (producing) {
        const batch = Math.max(1, Math.floor(o.rate / 10));
        const messages = [];
        for (let i = 0; i < batch; i++) {
          const k = `k${Math.floor(next() * o.keys)}`;
          messages.push({ key: k, value: JSON.stringify({ k, v: 1 + Math.floor(next() * 9), seq: seq++ }) });
        }
        for (let attempt = 1; ; attempt++) {
          try {
            await p.send({ topic: input, acks: -1, messages });
            produced += messages.length;
            break;
          } catch (e) {
            sendErrors++;
            // kafkajs's idempotent producer does not recover from some errors after a leader
            // change (OUT_OF_ORDER_SEQUENCE_NUMBER on every later send): start a new one.
            note(`input send failed (${(e as Error).message}); retrying with a new producer`);
            await p.disconnect().catch(() => undefined);
            await sleep(1000);
            p = await newProducer().catch(() => p);
            if (attempt >= 5) break;
          }
        }
        const due = started + (produced / o.rate) * 1000;
        if (due > Date.now()) await sleep(due - Date.now());
      }
      await p.disconnect().catch(() => undefined);
    })();

    const nodePid = (id: number) => kafka!.nodes.find((n) => n.nodeId === id)?.pid ?? 0;
    const underReplicated = () =>
      withAdmin(async (a) => {
        const topics = (await a.listTopics()).filter(
          (t) => t.startsWith('cluster-soak') || t.startsWith('__'),
        );
        const md = await a.fetchTopicMetadata({ topics });
        return md.topics.reduce(
          (n, t) => n + t.partitions.filter((p) => p.isr.length < p.replicas.length).length,
          0,
        );
      }).catch(() => -1);
    const waitReplicated = async () => {
      const until = Date.now() + 120_000;
      while (Date.now() < until) {
        if ((await underReplicated()) === 0) return;
        await sleep(500);
      }
      note('partitions still under-replicated after 120 s');
    };
    const mostLeader = () =>
      withAdmin(async (a) => {
        const topics = (await a.listTopics()).filter(
          (t) => t.startsWith('cluster-soak') || t === '__transaction_state',
        );
        const md = await a.fetchTopicMetadata({ topics });
        const n = new Map<number, number>();
        for (const t of md.topics) for (const p of t.partitions) n.set(p.leader, (n.get(p.leader) ?? 0) + 1);
        return [...n].sort((x, y) => y[1] - x[1])[0]?.[0] ?? 1;
      });

    /** Every event: its kind and when it started (the window of its gaps runs to the next one). */
    const events: Array<{ kind: Kind; at: number }> = [];
    const counts = new Map<Kind, number>();
    const begin = (kind: Kind, what: string) => {
      events.push({ kind, at: Date.now() });
      counts.set(kind, (counts.get(kind) ?? 0) + 1);
      note(`${kind}: ${what}`);
    };
    for (let i = 0; i < 3; i++) await ready(i, 180_000);
    const chaosFrom = Date.now();
    note('all workers ready');
    await sleep(o.every * 1000);
    const end = chaosFrom + o.minutes * 60_000;
    let step = 0;
    while (Date.now() < end - o.every * 1000) {
      const kind = CYCLE[step++ % CYCLE.length]!;
      const victim = Math.floor(Math.random() * 3);
      if (kind === 'worker-restart') {
        for (let i = 0; i < 3; i++) {
          begin(kind, `w${i} SIGTERM and start again`);
          await workers[i]!.kill('SIGTERM');
          spawn(i);
          await ready(i);
          await sleep(2000);
        }
      } else if (kind === 'worker-kill') {
        begin(kind, `w${victim} SIGKILL, start again in 2 s`);
        await workers[victim]!.kill('SIGKILL');
        await sleep(2000);
        spawn(victim);
      } else if (kind === 'worker-pause') {
        begin(kind, `w${victim} SIGSTOP for ${SESSION_MS + 4000} ms`);
        workers[victim]!.child.kill('SIGSTOP');
        await sleep(SESSION_MS + 4000);
        workers[victim]!.child.kill('SIGCONT');
      } else if (kind === 'broker-restart') {
        for (let id = 1; id <= 3; id++) {
          begin(kind, `node ${id} SIGTERM (controlled shutdown) and start again`);
          const pid = nodePid(id);
          signalGroup(pid, 'SIGTERM');
          if (!(await waitForExit(pid, 60_000))) {
            note(`node ${id} did not stop in 60 s: SIGKILL`);
            signalGroup(pid, 'SIGKILL');
            await waitForExit(pid, 10_000);
          }
          await startCluster();
          await waitReplicated();
        }
      } else {
        const id = await mostLeader();
        begin(kind, `node ${id} SIGKILL, start again in 10 s`);
        const pid = nodePid(id);
        signalGroup(pid, 'SIGKILL');
        await waitForExit(pid, 10_000);
        await sleep(10_000);
        await startCluster();
        await waitReplicated();
      }
      await sleep(o.every * 1000);
    }
    while (Date.now() < end) await sleep(1000);
    producing = false;
    await producerDone;
    const stoppedAt = Date.now();
    note(`input stopped: ${produced} records sent (${sendErrors} failed sends)`);

    // Verify with Kafka's own consumer (read_committed): expectations from the input as stored.
    const brokers = kafka!.brokers.join(',');
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
    const catchUpUntil = Date.now() + 600_000;
    while (out.length < inRecords.length && Date.now() < catchUpUntil) {
      await sleep(5000);
      out = await readCommittedWithJava(brokers, output, { withValues: true });
    }
    const catchUp = (Date.now() - stoppedAt) / 1000;
    out.sort((a, b) => a.partition - b.partition || a.offset - b.offset);
    const got = new Map<string, number[]>();
    for (const r of out) {
      const v = JSON.parse(r.value) as { k: string; sum: number };
      let l = got.get(v.k);
      if (!l) got.set(v.k, (l = []));
      l.push(v.sum);
    }
    const problems: string[] = [];
    for (const [k, sums] of expected) {
      const g = got.get(k) ?? [];
      if (g.length !== sums.length || g.some((x, i) => x !== sums[i])) {
        const i = g.findIndex((x, j) => x !== sums[j]);
        problems.push(`key ${k}: ${g.length} outputs for ${sums.length} inputs, first difference at #${i}`);
      }
    }
    for (const k of got.keys()) if (!expected.has(k)) problems.push(`key ${k}: output without input`);
    const exact = problems.length === 0 && out.length === inRecords.length;
    note(
      `verifier: ${inRecords.length} input records, ${out.length} output records, ${expected.size} keys: ${exact ? 'EXACT' : `NOT EXACT (${problems.length} keys differ)`}`,
    );

    // Gaps per kind of event: inter-arrival times on every output partition within each window.
    const gapsIn = (from: number, to: number) => {
      const gaps: number[] = [];
      for (const times of arrivals.values()) {
        let prev: number | undefined;
        for (const t of times) {
          if (t < from) {
            prev = t;
            continue;
          }
          if (t > to) {
            // The gap that spans the window's end counts for this window.
            if (prev !== undefined && prev <= to) gaps.push(t - prev);
            break;
          }
          if (prev !== undefined) gaps.push(t - prev);
          prev = t;
        }
      }
      return gaps.sort((a, b) => a - b);
    };
    const rows: string[] = [];
    const baseline = gapsIn(chaosFrom, events[0]?.at ?? stoppedAt);
    rows.push(`| baseline (no event) | — | ${quantile(baseline, 0.99)} | ${baseline.at(-1) ?? 0} |`);
    for (const kind of CYCLE) {
      const gaps: number[] = [];
      events.forEach((e, i) => {
        if (e.kind === kind) gaps.push(...gapsIn(e.at, events[i + 1]?.at ?? stoppedAt));
      });
      gaps.sort((a, b) => a - b);
      rows.push(`| ${kind} | ${counts.get(kind) ?? 0} | ${quantile(gaps, 0.99)} | ${gaps.at(-1) ?? 0} |`);
    }
    const minutes = (Date.now() - t0) / 60_000;
    const md = [
      `## Cluster soak ${new Date().toISOString()}: ${exact ? 'exact' : 'NOT EXACT'}`,
      '',
      `- command: \`node dist/bench/cluster-soak.js ${process.argv.slice(2).join(' ')}\``,
      `- ran ${minutes.toFixed(1)} min in all (cluster start, ${o.minutes} min of input and events from when all workers were ready, then catch-up and verification); node ${process.version}, ${cpus().length} CPUs shared with other jobs`,
      `- local KRaft cluster of 3 nodes (broker+controller each, RF 3, min ISR 2); running-sum job, exactly_once, 3 static-member workers (session ${SESSION_MS} ms), 6 input partitions, ${o.rate} records/s over ${o.keys} keys`,
      `- input: ${inRecords.length.toLocaleString('en')} records (${sendErrors} failed sends); output: ${out.length.toLocaleString('en')} records; catch-up after the input stopped: ${catchUp.toFixed(0)} s`,
      `- verifier (Kafka's console consumer, read_committed): ${exact ? 'every key’s output is exactly its running sums, in order, once' : problems.slice(0, 10).join('; ')}`,
      '',
      'Output gaps (ms) between records arriving on an output partition, from the start of each event to the start of the next (the reader is a kafkajs read_committed consumer; during broker events its own fetches fail over too):',
      '',
      '| kind | events | p99 gap (ms) | max gap (ms) |',
      '| --- | --- | --- | --- |',
      ...rows,
      '',
      '<details><summary>events</summary>',
      '',
      '```',
      ...log,
      '```',
      '</details>',
      '',
    ].join('\n');
    process.stdout.write(`${md}\n`);
    if (o.write) {
      const dir = join(root, 'bench/results');
      if (!existsSync(dir)) mkdirSync(dir, { recursive: true });
      const file = join(dir, `cluster-soak-${new Date().toISOString().slice(0, 10)}.md`);
      if (!existsSync(file))
        appendFileSync(file, '# Sluice rolling-restart soak on a 3-node cluster (bench/cluster-soak.ts)\n\n');
      appendFileSync(file, `${md}\n`);
      process.stderr.write(`written to ${file}\n`);
    }
    if (!exact)
      for (const w of workers)
        process.stderr.write(
          `--- ${w.name}\n${w.logs
            .filter((l) => !l.includes('"component":"kafkajs"'))
            .slice(-30)
            .join('\n')}\n`,
        );
    exitCode = exact ? 0 : 1;
  } finally {
    await clock.disconnect().catch(() => undefined);
    for (const w of workers) w.child.kill('SIGCONT');
    await Promise.all(workers.map((w) => w.kill('SIGKILL')));
    for (const d of stateDirs) rmSync(d, { recursive: true, force: true });
    await stopLocalKafka({ port: o.kafkaPort, dataDir, env: launcherEnv }).catch(() => undefined);
    rmSync(dataDir, { recursive: true, force: true });
  }
  return exitCode;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`${e?.stack ?? e}\n`);
    process.exit(1);
  },
);
