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
 *     [--every 20] [--kafka-port 39800] [--no-write] [--cycle broker-restart,worker-pause]
 *
 * `--cycle` runs only the events named, in that order (to chase one fault); TEST_WORKER_LOGS=<dir>
 * keeps every worker's whole log there, kafkajs's lines included, and the brokers' data folder
 * with their logs; TEST_WORKER_LOG_LEVEL=trace logs every kafkajs request too.
 *
 * The result is printed and appended to bench/results/cluster-soak-<YYYY-MM-DD>.md; exit code 1
 * when the output is not exact.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { signalGroup, waitForExit } from '../src/dev/broker-process.js';
import { type LocalKafka, startLocalKafka, stopLocalKafka } from '../src/dev/local-kafka.js';
import { jobTopics, partitionArrivals, withAdmin } from '../test/helpers/kafka.js';
import { allTasksRunning, exactlyOnceArgs } from '../test/helpers/workers.js';
import {
  eventLog,
  pacedInput,
  parseSoakOptions,
  quantile,
  report,
  runSoak,
  sleep,
  verdictBullet,
  verdictLine,
  verifyRunningSums,
  workerSlots,
} from './lib/soak-harness.js';

const SESSION_MS = 10_000;

type Kind = 'worker-restart' | 'worker-kill' | 'worker-pause' | 'broker-restart' | 'broker-kill';
const CYCLE: Kind[] = ['worker-restart', 'worker-kill', 'broker-restart', 'worker-pause', 'broker-kill'];

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  const at = argv.indexOf('--cycle');
  const cycle = at >= 0 ? (argv.splice(at, 2)[1] ?? '').split(',') : CYCLE;
  for (const k of cycle)
    if (!CYCLE.includes(k as Kind)) throw new Error(`--cycle: ${k} is none of ${CYCLE.join(', ')}`);
  const o = parseSoakOptions(argv, {
    minutes: 30,
    rate: 300,
    keys: 1000,
    every: 20,
    kafkaPort: 39800,
    write: true,
  });
  const { t0, note, lines: log } = eventLog('cluster-soak');
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
    // The test helpers read KAFKA_BROKERS when first used: the cluster's, from here on.
    process.env.KAFKA_BROKERS = kafka.brokers.join(',');
  };
  await startCluster();
  let exitCode = 1;
  let slots: ReturnType<typeof workerSlots> | undefined;
  let clock: Awaited<ReturnType<typeof partitionArrivals>> | undefined;
  try {
    const { id: groupId, input, output, env } = await jobTopics('cluster-soak', 6);
    // TEST_WORKER_LOG_LEVEL=trace: the workers' every line, kafkajs's requests included (with TEST_WORKER_LOGS).
    const logLevel = process.env.TEST_WORKER_LOG_LEVEL;
    const args = [...exactlyOnceArgs(SESSION_MS), ...(logLevel ? ['--log-level', logLevel] : [])];
    slots = workerSlots({ n: 3, prefix: 'cluster-soak', env, args, note });
    const { workers, spawn } = slots;
    const ready = async (i: number, timeoutMs = 120_000) => {
      const until = Date.now() + timeoutMs;
      while (Date.now() < until) {
        if (await allTasksRunning(workers[i]!).catch(() => false)) return true;
        await sleep(250);
      }
      note(`w${i} not ready after ${timeoutMs} ms`);
      return false;
    };
    clock = await partitionArrivals(output);
    const arrivals = clock.arrivals;
    note(
      `cluster at ${kafka!.brokers.join(',')}, 3 workers, ${o.rate} records/s over ${o.keys} keys, ${o.minutes} min`,
    );
    const feed = pacedInput({ topic: input, rate: o.rate, keys: o.keys, note });

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
      const kind = cycle[step++ % cycle.length] as Kind;
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
    await feed.stop();
    const stoppedAt = Date.now();
    note(`input stopped: ${feed.state.produced} records sent (${feed.state.sendErrors} failed sends)`);

    // Verify with Kafka's own consumer (read_committed): expectations from the input as stored.
    const v = await verifyRunningSums(kafka!.brokers.join(','), input, output, 600_000);
    note(verdictLine(v));
    // Liveness: every worker still running is a member of the group. A worker out of the group
    // (its consumer stuck) leaves its tasks to the others, so the output alone can be exact.
    const members = await withAdmin(
      async (a) => (await a.describeGroups([groupId])).groups[0]?.members.length ?? 0,
    );
    const live = workers.filter(
      (w) => w !== undefined && w.child.exitCode === null && w.child.signalCode === null,
    ).length;
    note(`group members at the end: ${members} of ${live} live workers`);

    // Gaps per kind of event: inter-arrival times on every output partition within each window,
    // each with where it began (the longest is shown with its partition and start, to be matched
    // with the events and the workers' logs).
    type Gap = { ms: number; from: number; partition: number };
    const gapsIn = (from: number, to: number) => {
      const gaps: Gap[] = [];
      for (const [partition, times] of arrivals) {
        let prev: number | undefined;
        for (const t of times) {
          if (t < from) {
            prev = t;
            continue;
          }
          if (t > to) {
            // The gap that spans the window's end counts for this window.
            if (prev !== undefined && prev <= to) gaps.push({ ms: t - prev, from: prev, partition });
            break;
          }
          if (prev !== undefined) gaps.push({ ms: t - prev, from: prev, partition });
          prev = t;
        }
      }
      return gaps.sort((a, b) => a.ms - b.ms);
    };
    const row = (kind: string, events: number | string, gaps: Gap[]) => {
      const max = gaps.at(-1);
      const where = max ? ` (partition ${max.partition}, from +${Math.round((max.from - t0) / 1000)}s)` : '';
      const ms = gaps.map((g) => g.ms);
      return `| ${kind} | ${events} | ${quantile(ms, 0.99)} | ${max?.ms ?? 0}${where} |`;
    };
    const rows: string[] = [];
    rows.push(row('baseline (no event)', '—', gapsIn(chaosFrom, events[0]?.at ?? stoppedAt)));
    for (const kind of CYCLE) {
      const gaps: Gap[] = [];
      events.forEach((e, i) => {
        if (e.kind === kind) gaps.push(...gapsIn(e.at, events[i + 1]?.at ?? stoppedAt));
      });
      gaps.sort((a, b) => a.ms - b.ms);
      rows.push(row(kind, counts.get(kind) ?? 0, gaps));
    }
    const minutes = (Date.now() - t0) / 60_000;
    const md = [
      `## Cluster soak ${new Date().toISOString()}: ${v.exact ? 'exact' : 'NOT EXACT'}`,
      '',
      `- command: \`node dist/bench/cluster-soak.js ${process.argv.slice(2).join(' ')}\``,
      `- ran ${minutes.toFixed(1)} min in all (cluster start, ${o.minutes} min of input and events from when all workers were ready, then catch-up and verification); node ${process.version}, ${cpus().length} CPUs shared with other jobs`,
      `- local KRaft cluster of 3 nodes (broker+controller each, RF 3, min ISR 2); running-sum job, exactly_once, 3 static-member workers (session ${SESSION_MS} ms), 6 input partitions, ${o.rate} records/s over ${o.keys} keys`,
      `- input: ${v.inputs.toLocaleString('en')} records (${feed.state.sendErrors} failed sends); output: ${v.outputs.toLocaleString('en')} records; catch-up after the input stopped: ${((Date.now() - stoppedAt) / 1000).toFixed(0)} s (to the verifier's last read: ${v.catchUpS.toFixed(0)} s)`,
      verdictBullet(v),
      `- group members at the end: ${members} of ${live} live workers${members < live ? ' (**a worker dropped out of the group and stayed out**)' : ''}`,
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
    report({
      name: 'cluster-soak',
      title: 'Sluice rolling-restart soak on a 3-node cluster (bench/cluster-soak.ts)',
      md,
      write: o.write,
      exact: v.exact && members >= live,
      workers,
    });
    exitCode = v.exact && members >= live ? 0 : 1;
  } finally {
    await clock?.stop().catch(() => undefined);
    await slots?.cleanup();
    await stopLocalKafka({ port: o.kafkaPort, dataDir, env: launcherEnv }).catch(() => undefined);
    // TEST_WORKER_LOGS keeps the brokers' data and logs too (<dataDir>/node-*/logs), for the same chase.
    if (process.env.TEST_WORKER_LOGS) note(`brokers' data and logs kept in ${dataDir}`);
    else rmSync(dataDir, { recursive: true, force: true });
  }
  return exitCode;
}

runSoak(main);
