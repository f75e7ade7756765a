/**
 * End-to-end latency at fixed input rates (issue 19 item 1), Sluice and Kafka Streams side by side.
 *
 *   npm run bench:latency                          # capacity, then 10/25/50/75 % of it, EOS and ALOS
 *   npm run bench:latency -- --capacity 36000      # skip the capacity run
 *   npm run bench:latency -- --quick               # smoke run (short windows, two loads)
 *
 * Workload: the keyed running sum (bench/jobs/running-sum.ts, BenchApp `running-sum`: a process
 * with one valueState / a Processor with one KeyValueStore, every update emitted; Kafka Streams'
 * record cache off), 10,000 keys uniform, 4 partitions, one process each, commit interval 100 ms.
 *
 *  1. Capacity: Sluice's steady rate (10 → 90 % committed) on the running sum under exactly-once,
 *     from a throughput run of --capacity-records (bench/lib/throughput.ts), unless --capacity.
 *  2. For every system, guarantee and load (a fraction of that capacity): a fresh process on fresh
 *     topics; once it is ready, a read_committed reader (kafkajs, fixed aborted filter) of the
 *     output joins, then input is produced at the fixed rate in 10 ms ticks, each record's
 *     timestamp = its send time (wall clock). Both systems give an output its input's timestamp,
 *     so latency = the moment the reader receives the output − that timestamp.
 *  3. The window: from 5 s (--warmup-s) after the first output for 20 s (--measure-s); outputs
 *     received in it are the samples; the producer stops at its end. p50 / p99 per load.
 *
 * Writes bench/results/latency-<date>.md and the plot docs/latency.svg (quick runs write both
 * into bench/results/ with -quick).
 */
import { execSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { uniqueName } from '../test/helpers/kafka.js';
import { observeAll, poller } from './lib/kafka-io.js';
import { COMMIT_INTERVAL_MS, type Guarantee, PEER_JAR, type Proc, root, startProc } from './lib/procs.js';
import { histogramQuantile, type Scrape, scrape, since, total } from './lib/prom.js';
import { benchCommand, fmt, svgLineChart } from './lib/report.js';
import { percentile } from './lib/steady.js';
import { cleanUp, prepare, runOne, seedOf, short, sleep, WORKLOADS } from './lib/throughput.js';

interface Options {
  quick: boolean;
  capacity: number | undefined;
  capacityRecords: number;
  loads: number[];
  guarantees: Guarantee[];
  systems: Array<'sluice' | 'kafka-streams'>;
  warmupS: number;
  measureS: number;
  partitions: number;
  write: boolean;
  name: string | undefined;
}

function parseOptions(argv: string[]): Options {
  const quick = argv.includes('--quick');
  const o: Options = {
    quick,
    capacity: undefined,
    capacityRecords: quick ? 100_000 : 1_000_000,
    loads: quick ? [10, 50] : [10, 25, 50, 75],
    guarantees: ['exactly_once', 'at_least_once'],
    systems: ['sluice', 'kafka-streams'],
    warmupS: quick ? 2 : 5,
    measureS: quick ? 5 : 20,
    partitions: 4,
    write: true,
    name: undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    const num = () => {
      const v = Number(next());
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${a} expects a positive number`);
      return v;
    };
    switch (a) {
      case '--quick':
        break;
      case '--capacity':
        o.capacity = num();
        break;
      case '--capacity-records':
        o.capacityRecords = Math.floor(num());
        break;
      case '--loads':
        o.loads = next()
          .split(',')
          .map((x) => {
            const v = Number(x);
            if (!(v > 0 && v <= 100)) throw new Error(`--loads: ${x} is not a percentage in (0, 100]`);
            return v;
          });
        break;
      case '--guarantees':
        o.guarantees = next().split(',') as Guarantee[];
        for (const g of o.guarantees)
          if (g !== 'exactly_once' && g !== 'at_least_once') throw new Error(`--guarantees: unknown ${g}`);
        break;
      case '--systems':
        o.systems = next().split(',') as Options['systems'];
        for (const s of o.systems)
          if (s !== 'sluice' && s !== 'kafka-streams') throw new Error(`--systems: unknown system ${s}`);
        break;
      case '--warmup-s':
        o.warmupS = num();
        break;
      case '--measure-s':
        o.measureS = num();
        break;
      case '--partitions':
        o.partitions = Math.floor(num());
        break;
      case '--name':
        o.name = next();
        break;
      case '--no-write':
        o.write = false;
        break;
      case '--kafka-port':
        i++; // handled by bench/bench.mjs
        break;
      default:
        throw new Error(`unknown option ${a}`);
    }
  }
  return o;
}

interface RateProducer {
  stop(): Promise<{ sent: number; errors: number; seconds: number; error: string }>;
}

const producers = new Set<ReturnType<typeof spawn>>();
process.once('exit', () => {
  for (const c of producers) c.kill('SIGKILL');
});

/** bench/rate-producer.ts in a child process (its ticks do not wait for the reader's decoding). */
async function rateProducer(topic: string, rate: number): Promise<RateProducer> {
  const child = spawn(process.execPath, [join(root, 'dist/bench/rate-producer.js')], {
    env: {
      ...process.env,
      BENCH_INPUT: topic,
      BENCH_RATE: String(rate),
      BENCH_SEED: String(seedOf(W.id)),
      BENCH_KEYS: String(W.dist.keys),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  producers.add(child);
  const exited = new Promise<void>((r) =>
    child.once('exit', () => {
      producers.delete(child);
      r();
    }),
  );
  const t0 = performance.now();
  while (!out.includes('READY')) {
    if (child.exitCode !== null) throw new Error('the input producer exited before it was ready');
    if (performance.now() - t0 > 60_000) throw new Error('the input producer not ready in 60 s');
    await sleep(20);
  }
  return {
    async stop() {
      child.kill('SIGTERM');
      await exited;
      const m = /SENT (\d+) (\d+) ([\d.]+) ?(.*)/.exec(out);
      if (!m) throw new Error(`the input producer did not report: ${out.slice(-200)}`);
      return { sent: Number(m[1]), errors: Number(m[2]), seconds: Number(m[3]), error: m[4] ?? '' };
    },
  };
}

interface Point {
  system: string;
  guarantee: Guarantee;
  load: number;
  rate: number;
  sent: number;
  /** records/s the producer sent, start to stop */
  achieved: number;
  samples: number;
  /** input records beyond those sent (a retried request written twice) */
  duplicates: number;
  p50: number;
  p99: number;
  max: number;
  /** outputs received in the window / (window × rate): below 1 when the system fell behind */
  keptUp: number;
  /**
   * Seconds from the first output to the last output received more than 1 s after its input,
   * counting outputs up to the window's end (0: none late, or only the first batch). Above the
   * warm-up, a backlog (the start-up one: cold code, a growing heap, input produced while the
   * process started; or a later stall) was draining inside the window, and is in its p99.
   */
  settledS: number;
  /** Outputs were still more than 1 s late in the window's last second: not settled by its end. */
  lateAtEnd: boolean;
  /** Sluice only: the worker's own metrics over the window (where the time goes) */
  inside?: Inside;
  error?: string;
}

/** The settled column: seconds, with "+" when still late at the window's end. */
const settled = (p: Point): string => `${fmt(p.settledS, 1)}${p.lateAtEnd ? '+' : ''}`;

/** A Sluice worker's view of the window, from its /metrics at the window's start and end. */
interface Inside {
  /** commit acknowledged − input timestamp (the reader's latency less its own fetch) */
  visibleP50: number;
  visibleP99: number;
  /** checkpoints per second and task, and their duration (start to commit acknowledged) */
  checkpointsPerS: number;
  checkpointP50: number;
  checkpointP99: number;
  /** the event loop's delay (monitorEventLoopDelay) over the window */
  loopDelayP99: number;
  loopDelayMax: number;
  /** fraction of the window the process was on a CPU, and in GC */
  cpu: number;
  gc: number;
  /** exactly-once v2: the worker's transactions' phases (sluice_transaction_phase_seconds), ms */
  phases: Record<'queued' | 'produce' | 'offsets' | 'end', { p50: number; p99: number }>;
  /** and their Produce requests, on average (sluice_transaction_produce_requests) */
  requestsMean: number;
}

function insideOf(d: Scrape, end: Scrape, seconds: number, tasks: number): Inside {
  const ms = (name: string, q: number) => histogramQuantile(d, name, q) * 1000;
  return {
    visibleP50: ms('sluice_end_to_end_latency_seconds', 0.5),
    visibleP99: ms('sluice_end_to_end_latency_seconds', 0.99),
    checkpointsPerS: total(d, 'sluice_checkpoint_duration_seconds_count') / seconds / tasks,
    checkpointP50: ms('sluice_checkpoint_duration_seconds', 0.5),
    checkpointP99: ms('sluice_checkpoint_duration_seconds', 0.99),
    // Gauges reset at each scrape (prom-client): the end's covers the window.
    loopDelayP99: total(end, 'sluice_node_nodejs_eventloop_lag_p99_seconds') * 1000,
    loopDelayMax: total(end, 'sluice_node_nodejs_eventloop_lag_max_seconds') * 1000,
    cpu: total(d, 'sluice_node_process_cpu_seconds_total') / seconds,
    gc: total(d, 'sluice_node_nodejs_gc_duration_seconds_sum') / seconds,
    phases: Object.fromEntries(
      (['queued', 'produce', 'offsets', 'end'] as const).map((phase) => [
        phase,
        {
          p50: histogramQuantile(d, 'sluice_transaction_phase_seconds', 0.5, { phase }) * 1000,
          p99: histogramQuantile(d, 'sluice_transaction_phase_seconds', 0.99, { phase }) * 1000,
        },
      ]),
    ) as Inside['phases'],
    requestsMean:
      total(d, 'sluice_transaction_produce_requests_sum') /
      total(d, 'sluice_transaction_produce_requests_count'),
  };
}

const W = WORKLOADS.find((w) => w.id === 'running-sum')!;

async function measure(
  system: 'sluice' | 'kafka-streams',
  guarantee: Guarantee,
  load: number,
  rate: number,
  o: Options,
): Promise<Point> {
  const id = uniqueName(`bench-lat-${short(system)}-${guarantee === 'exactly_once' ? 'eos' : 'alo'}-${load}`);
  const pt: Point = {
    system,
    guarantee,
    load,
    rate,
    sent: 0,
    achieved: Number.NaN,
    samples: 0,
    duplicates: 0,
    p50: Number.NaN,
    p99: Number.NaN,
    max: Number.NaN,
    keptUp: Number.NaN,
    settledS: Number.NaN,
    lateAtEnd: false,
  };
  const stateDir = mkdtempSync(join(tmpdir(), 'sluice-bench-'));
  const poll = await poller();
  let proc: Proc | undefined;
  let obs: Awaited<ReturnType<typeof observeAll>> | undefined;
  let producer: RateProducer | undefined;
  try {
    const t = await prepare(W, id, 0, o.partitions, poll);
    proc = await startProc({
      system,
      kind: W.kind,
      appId: id,
      input: t.input,
      output: t.output,
      guarantee,
      stateDir,
      brokers: process.env.KAFKA_BROKERS!,
      ksCacheBytes: W.ksCacheBytes,
    });
    await proc.ready(5 * 60_000);
    obs = await observeAll(t.output, `${id}-observer`);
    await Promise.race([
      obs.joined,
      sleep(60_000).then(() => {
        throw new Error('the output reader did not join in 60 s');
      }),
    ]);
    producer = await rateProducer(t.input, rate);
    const t0 = performance.now();
    while (!obs.firstAt()) {
      if (performance.now() - t0 > 120_000) throw new Error('no output in 120 s');
      if (proc.child.exitCode !== null) throw new Error(`exited early:\n${proc.logs.slice(-20).join('\n')}`);
      await sleep(20);
    }
    const from = obs.firstAt() + o.warmupS * 1000;
    const to = from + o.measureS * 1000;
    let atFrom: Scrape | undefined;
    while (performance.now() < to) {
      if (proc.child.exitCode !== null) throw new Error(`exited early:\n${proc.logs.slice(-20).join('\n')}`);
      if (atFrom === undefined && proc.metricsUrl && performance.now() >= from)
        atFrom = await scrape(proc.metricsUrl);
      await sleep(50);
    }
    if (atFrom && proc.metricsUrl) {
      const atTo = await scrape(proc.metricsUrl);
      pt.inside = insideOf(since(atFrom, atTo), atTo, o.measureS, o.partitions);
    }
    const sent = await producer.stop();
    producer = undefined;
    pt.sent = sent.sent;
    pt.achieved = sent.sent / sent.seconds;
    if (sent.errors > 0)
      throw new Error(`the input producer failed to send ${sent.errors} records: ${sent.error}`);
    // More in the topic than sent: kafkajs retried a request that had timed out but been written
    // (the producer is not idempotent, so as not to serialize its requests); noted, not fatal.
    const inTopic = await poll.high(t.input);
    pt.duplicates = inTopic - sent.sent;
    if (inTopic < sent.sent)
      throw new Error(`the producer sent ${sent.sent} records, the input holds ${inTopic}`);
    const lat: number[] = [];
    for (let i = 0; i < obs.receivedAt.length; i++) {
      const at = obs.receivedAt[i]!;
      if (at >= from && at < to) lat.push(obs.latencies[i]!);
    }
    pt.samples = lat.length;
    pt.p50 = percentile(lat, 50);
    pt.p99 = percentile(lat, 99);
    pt.max = percentile(lat, 100);
    pt.keptUp = lat.length / (o.measureS * rate);
    let lastLate = obs.firstAt();
    for (let i = 0; i < obs.receivedAt.length; i++) {
      const at = obs.receivedAt[i]!;
      if (at < to && obs.latencies[i]! > 1000 && at > lastLate) lastLate = at;
    }
    pt.settledS = (lastLate - obs.firstAt()) / 1000;
    pt.lateAtEnd = lastLate >= to - 1000;
    if (lat.length === 0) throw new Error('no output in the measurement window');
  } catch (e) {
    pt.error = (e as Error).message.split('\n')[0];
    console.error(`  ${system} ${guarantee} ${load} %: ${(e as Error).message}`);
  } finally {
    await producer?.stop().catch(() => undefined);
    await obs?.stop().catch(() => undefined);
    await cleanUp(proc, poll, stateDir, id);
  }
  return pt;
}

function sh(cmd: string): string {
  try {
    return execSync(cmd, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch {
    return '?';
  }
}

function report(o: Options, capacity: number, capacityHow: string, points: Point[], env: string[]): string {
  const L: string[] = [];
  L.push(
    `# End-to-end latency, Sluice vs Kafka Streams${o.quick ? ' (quick smoke run)' : ''} — ${new Date().toISOString().slice(0, 10)}`,
  );
  L.push('');
  L.push(...env);
  L.push(`- capacity (100 %): ${fmt(capacity)} records/s, ${capacityHow}`);
  L.push('');
  L.push(`![latency](${o.write && !o.quick ? '../../docs/latency.svg' : `${fileName(o)}.svg`})`);
  L.push('');
  L.push(
    `Latency = the moment a read_committed reader receives the output − the input's send time (its record timestamp, which the output keeps). Samples: outputs received from ${o.warmupS} s after the first output for ${o.measureS} s. "Kept up" = outputs in the window / (window × rate): below 1 means the system fell behind the input rate. "Input written twice": records kafkajs's producer wrote again when it retried a request that had timed out (the input producer is not idempotent). "Settled": seconds from the first output to the last output (up to the window's end) that came more than 1 s after its input; above the ${o.warmupS} s warm-up, a backlog (the start-up one, or a later stall) was draining inside the window and is in its p99; "+" when outputs were still that late in the window's last second (the system never settled).`,
  );
  L.push('');
  L.push(
    '| guarantee | load | input records/s (target / sent) | system | p50 (ms) | p99 (ms) | max (ms) | samples | kept up | input written twice | settled (s) |',
  );
  L.push('|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const p of points)
    L.push(
      `| ${p.guarantee} | ${p.load} % | ${fmt(p.rate)} / ${fmt(p.achieved)} | ${p.system} | ${p.error ? `failed: ${p.error}` : fmt(p.p50)} | ${fmt(p.p99)} | ${fmt(p.max)} | ${fmt(p.samples)} | ${fmt(p.keptUp, 2)} | ${fmt(p.duplicates)} | ${settled(p)} |`,
    );
  L.push('');
  L.push('## Ratio Sluice / Kafka Streams (below 1 is better for Sluice)');
  L.push('');
  L.push('| guarantee | load | p50 | p99 |');
  L.push('|---|---:|---:|---:|');
  for (const s of points.filter((p) => p.system === 'sluice')) {
    const k = points.find(
      (p) => p.system === 'kafka-streams' && p.guarantee === s.guarantee && p.load === s.load,
    );
    if (!k) continue;
    const q = (a: number, b: number) => (Number.isFinite(a) && b > 0 ? fmt(a / b, 2) : '—');
    L.push(`| ${s.guarantee} | ${s.load} % | ${q(s.p50, k.p50)} | ${q(s.p99, k.p99)} |`);
  }
  L.push('');
  const inside = points.filter((p) => p.inside !== undefined);
  if (inside.length > 0) {
    /** A paragraph, then a table: its header row and one row per point. */
    const table = (intro: string, head: string[], rows: string[][]) => {
      L.push(
        intro,
        '',
        `| ${head.join(' | ')} |`,
        `|---|${head
          .slice(1)
          .map(() => '---:')
          .join('|')}|`,
      );
      for (const r of rows) L.push(`| ${r.join(' | ')} |`);
    };
    L.push("## Where Sluice's time goes (the worker's /metrics over the same window)", '');
    table(
      '"Visible" = the moment the commit (exactly-once) or the send (at-least-once) was acknowledged − the input\'s timestamp: the reader\'s latency less its own fetch. Checkpoints: per second and task, and their duration from start to acknowledgement. Loop delay: how late the event loop ran a timer. CPU and GC: fractions of one core.',
      [
        'guarantee',
        'load',
        'reader p50 / p99',
        'visible p50 / p99',
        'checkpoints/s',
        'checkpoint p50 / p99',
        'loop delay p99 / max',
        'CPU',
        'GC',
      ],
      inside.map((p) => {
        const i = p.inside!;
        return [
          p.guarantee,
          `${p.load} %`,
          `${fmt(p.p50)} / ${fmt(p.p99)}`,
          `${fmt(i.visibleP50)} / ${fmt(i.visibleP99)}`,
          fmt(i.checkpointsPerS, 1),
          `${fmt(i.checkpointP50, 1)} / ${fmt(i.checkpointP99, 1)}`,
          `${fmt(i.loopDelayP99)} / ${fmt(i.loopDelayMax)}`,
          fmt(i.cpu, 2),
          fmt(i.gc, 3),
        ];
      }),
    );
    const eos = inside.filter((p) => Number.isFinite(p.inside!.phases.end.p50));
    const ph = (x: { p50: number; p99: number }) => `${fmt(x.p50, 1)} / ${fmt(x.p99, 1)}`;
    if (eos.length > 0) {
      L.push('');
      table(
        "The worker's exactly-once transactions by phase (`sluice_transaction_phase_seconds`, ms; produce and offsets count from the commit's start and overlap) and their Produce requests (`sluice_transaction_produce_requests`):",
        [
          'guarantee',
          'load',
          'queued p50 / p99',
          'produce p50 / p99',
          'offsets p50 / p99',
          'end p50 / p99',
          'Produce requests (mean)',
        ],
        eos.map((p) => {
          const { phases, requestsMean } = p.inside!;
          return [
            p.guarantee,
            `${p.load} %`,
            ph(phases.queued),
            ph(phases.produce),
            ph(phases.offsets),
            ph(phases.end),
            fmt(requestsMean, 2),
          ];
        }),
      );
    }
    L.push('');
  }
  return `${L.join('\n')}\n`;
}

function chart(points: Point[], capacity: number): string {
  const colors: Record<string, string> = {
    'sluice exactly_once': '#1f77b4',
    'sluice at_least_once': '#7fb8e0',
    'kafka-streams exactly_once': '#d62728',
    'kafka-streams at_least_once': '#f4a09f',
  };
  const series = [];
  for (const key of Object.keys(colors)) {
    const [system, guarantee] = key.split(' ');
    const ps = points.filter((p) => p.system === system && p.guarantee === guarantee && !p.error);
    if (!ps.length) continue;
    const label = `${system === 'sluice' ? 'Sluice' : 'Kafka Streams'} ${guarantee === 'exactly_once' ? 'EOS' : 'ALOS'}`;
    series.push({
      name: `${label} p50`,
      color: colors[key]!,
      points: ps.map((p) => [p.load, p.p50] as [number, number]),
    });
    series.push({
      name: `${label} p99`,
      color: colors[key]!,
      dashed: true,
      points: ps.map((p) => [p.load, p.p99] as [number, number]),
    });
  }
  return svgLineChart(series, {
    title: `Keyed running sum: end-to-end latency vs load (100 % = ${fmt(capacity)} records/s)`,
    xLabel: "input rate, % of Sluice's exactly-once capacity",
    yLabel: 'latency, ms (log scale)',
  });
}

const fileName = (o: Options) =>
  o.name ?? `latency-${new Date().toISOString().slice(0, 10)}${o.quick ? '-quick' : ''}`;

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  if (!process.env.KAFKA_BROKERS)
    throw new Error('set KAFKA_BROKERS (npm run bench:latency starts a broker)');
  const loadBefore = sh('uptime');
  const started = performance.now();
  const log = (s: string) => console.error(`[${((performance.now() - started) / 1000).toFixed(0)} s] ${s}`);
  if (!existsSync(PEER_JAR))
    throw new Error(`${PEER_JAR} is missing: run \`mvn -q package\` in bench/peers/kafka-streams`);
  let capacity = o.capacity;
  let capacityHow = 'given with --capacity';
  if (capacity === undefined) {
    log(`capacity: Sluice, running sum, exactly-once, ${fmt(o.capacityRecords)} records`);
    const r = await runOne('sluice', W, 'exactly_once', {
      records: o.capacityRecords,
      partitions: o.partitions,
      runTimeoutS: 900,
    });
    if (!Number.isFinite(r.steadyThroughput))
      throw new Error(`capacity run failed: ${r.error ?? 'no steady rate'}`);
    capacity = r.steadyThroughput;
    capacityHow = `measured: Sluice's steady rate (10 → 90 % committed) on the running sum, exactly-once, ${fmt(o.capacityRecords)} records (CPU ${fmt(r.cpuPerMillion, 1)} s per million)`;
    log(`  capacity ${fmt(capacity)} records/s`);
  }
  const points: Point[] = [];
  for (const g of o.guarantees)
    for (const load of o.loads)
      for (const system of o.systems) {
        const rate = Math.round((capacity * load) / 100);
        log(`${system} ${g}: ${load} % = ${fmt(rate)} records/s`);
        const p = await measure(system, g, load, rate, o);
        points.push(p);
        log(
          `  p50 ${fmt(p.p50)} ms, p99 ${fmt(p.p99)} ms, ${fmt(p.samples)} samples, kept up ${fmt(p.keptUp, 2)}, settled ${settled(p)} s`,
        );
      }
  const env = [
    `- command: \`${benchCommand('bench:latency')}\``,
    `- date: ${new Date().toISOString()}; git ${sh(`git -C ${root} rev-parse --short HEAD`)}`,
    `- machine: ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}); shared; load (uptime) before: ${loadBefore}; after: ${sh('uptime')}`,
    `- broker: ${process.env.BENCH_BROKER_DESC ?? process.env.KAFKA_BROKERS}; ${o.partitions} partitions; commit interval ${COMMIT_INTERVAL_MS} ms; one process per system (one Sluice worker, one Kafka Streams stream thread, -Xmx1g), Kafka Streams' record cache off`,
    `- workload: keyed running sum, ${fmt(W.dist.keys)} keys uniform; the driver (producer and reader) runs on the same machine`,
  ];
  const md = report(o, capacity, capacityHow, points, env);
  console.log(md);
  if (o.write) {
    const dir = join(root, 'bench/results');
    mkdirSync(dir, { recursive: true });
    const name = fileName(o);
    writeFileSync(join(dir, `${name}.md`), md);
    const svg = chart(points, capacity);
    const svgPath = o.quick ? join(dir, `${name}.svg`) : join(root, 'docs/latency.svg');
    writeFileSync(svgPath, svg);
    console.error(`written to bench/results/${name}.md and ${svgPath}`);
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e?.stack ?? e);
    process.exit(1);
  },
);
