/**
 * Async operators (docs/ASYNC.md): what `mapAsync` sustains against a real local HTTP service,
 * the latency it adds, and memory under a service far slower than the input.
 *
 * The job is test/fixtures/jobs/async-enrich.ts: each record ({k, v, seq}, 10,000 keys) is
 * enriched by one HTTP call (mapAsync, per-key order, exactly-once) and summed per key. One worker,
 * 4 partitions (4 tasks); the service (test/helpers/enrich-service.ts) answers after --latency-ms.
 *
 *  1. Throughput against concurrency (--concurrency, default 1,8,64,256): the input is produced
 *     first; the steady rate (10 % → 90 % of the outputs) against the bound
 *     concurrency × tasks / latency, and the p50/p99 of sluice_async_duration_seconds.
 *  2. Added latency at moderate load: concurrency 64, the input paced at --paced-fraction (0.5) of
 *     the rate measured at 64 for --paced-seconds (20); p50/p99 of the time in the stage.
 *  3. Memory with a service 100× slower than the input: latency --slow-ms (2000), concurrency 16
 *     (capacity 4 × 16 / 2 s = 32 records/s), input paced at 3,200 records/s for --rss-seconds
 *     (60); the worker's RSS sampled every 5 s, and its lag, which must grow while RSS stays flat.
 *
 *   npx tsc -p . && KAFKA_BROKERS=127.0.0.1:9092 node dist/bench/async.js [--latency-ms 5]
 *     [--concurrency 1,8,64,256] [--paced-seconds 20] [--rss-seconds 60] [--slow-ms 2000]
 *
 * Prints a markdown report and appends it to bench/results/async-<YYYY-MM-DD>.md.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { startEnrichService } from '../test/helpers/enrich-service.js';
import { createTopics, deleteTopicsMatching, produce, uniqueName } from '../test/helpers/kafka.js';
import { RunningSumInput } from '../test/helpers/running-sum.js';
import { spawnWorker, type WorkerProcess } from '../test/helpers/workers.js';
import { poller } from './lib/kafka-io.js';
import { root } from './lib/procs.js';
import { histogramQuantile, parseMetrics } from './lib/prom.js';
import { type CommitSample, steadyRate } from './lib/steady.js';

const TASKS = 4;
const KEYS = 10_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : def;
}

function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : Number.NaN;
}

async function job(prefix: string) {
  const id = uniqueName(prefix);
  const input = `${id}-in`;
  const output = `${id}-out`;
  await createTopics([
    { topic: input, partitions: TASKS },
    { topic: output, partitions: TASKS },
  ]);
  return { id, input, output, env: { TEST_APP_ID: id, TEST_INPUT: input, TEST_OUTPUT: output } };
}

async function startWorker(
  env: Record<string, string>,
  concurrency: number,
  url: string,
  retries = 0,
): Promise<WorkerProcess> {
  const w = spawnWorker('async-enrich', {
    name: `c${concurrency}`,
    env: {
      ...env,
      TEST_SERVICE_URL: url,
      TEST_ASYNC_CONCURRENCY: String(concurrency),
      TEST_ASYNC_RETRIES: String(retries),
    },
    args: ['--processing.guarantee', 'exactly_once'],
  });
  await w.url();
  return w;
}

/** Paces `total` records at `rate`/s in 50 ms slices. */
async function pace(input: string, gen: RunningSumInput, rate: number, seconds: number): Promise<void> {
  const started = performance.now();
  const total = Math.round(rate * seconds);
  while (gen.count < total) {
    const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * rate));
    if (due > gen.count) await produce(input, gen.next(due - gen.count));
    await sleep(50);
  }
}

/**
 * The HTTP client's own ceiling: a bare loop of `fetch` calls (what the job's function does) with
 * `concurrency` in flight, in a process of its own like the worker, for `seconds`: calls/s.
 */
async function bareFetch(url: string, concurrency: number, seconds: number): Promise<number> {
  const script = `
    const url = ${JSON.stringify(url)}; const end = performance.now() + ${seconds * 1000}; let n = 0;
    async function loop(w) { for (let i = 0; performance.now() < end; i++) {
      const r = await fetch(url + '/enrich?k=k' + w + '&seq=' + i, { signal: new AbortController().signal });
      if (r.ok) await r.json(); else await r.text(); n++; } }
    await Promise.all(Array.from({ length: ${concurrency} }, (_, w) => loop(w)));
    console.log(n / ${seconds});`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  await new Promise((r) => child.once('exit', r));
  return Number(out.trim());
}

async function throughput(latencyMs: number, concurrency: number, errorRate = 0) {
  const service = await startEnrichService({ latencyMs, errorRate });
  const { id, input, output, env } = await job(`b-async-${concurrency}`);
  const bound = (concurrency * TASKS) / (latencyMs / 1000);
  // About 15 s at the bound, at least 4,000 and at most 120,000 records.
  const n = Math.max(4000, Math.min(120_000, Math.round(bound * 15)));
  const gen = new RunningSumInput({ seed: concurrency, keys: KEYS });
  await produce(input, gen.next(n));
  const poll = await poller();
  const w = await startWorker(env, concurrency, service.url, errorRate > 0 ? 6 : 0);
  const samples: CommitSample[] = [];
  const t0 = performance.now();
  try {
    for (;;) {
      const high = await poll.high(output);
      samples.push({ at: performance.now(), committed: Math.max(0, high) });
      if (high >= n || performance.now() - t0 > 600_000) break;
      await sleep(200);
    }
    const text = await w.metrics();
    const rate = steadyRate(samples, n);
    await w.kill('SIGTERM');
    const bare = await bareFetch(service.url, concurrency * TASKS, 10);
    return {
      bare,
      concurrency,
      records: n,
      rate,
      bound,
      p50: histogramQuantile(parseMetrics(text), 'sluice_async_duration_seconds', 0.5) * 1000,
      p99: histogramQuantile(parseMetrics(text), 'sluice_async_duration_seconds', 0.99) * 1000,
      calls: service.stats.calls,
    };
  } finally {
    await w.kill('SIGTERM'); // (already stopped on success)
    await poll.close();
    await service.close();
    await deleteTopicsMatching(id);
  }
}

async function paced(latencyMs: number, rate: number, seconds: number) {
  const service = await startEnrichService({ latencyMs });
  const { id, input, env } = await job('b-async-paced');
  const w = await startWorker(env, 64, service.url);
  try {
    await pace(input, new RunningSumInput({ seed: 3, keys: KEYS }), rate, seconds);
    await sleep(3000);
    const text = await w.metrics();
    return {
      rate,
      p50: histogramQuantile(parseMetrics(text), 'sluice_async_duration_seconds', 0.5) * 1000,
      p99: histogramQuantile(parseMetrics(text), 'sluice_async_duration_seconds', 0.99) * 1000,
    };
  } finally {
    await w.kill('SIGTERM');
    await service.close();
    await deleteTopicsMatching(id);
  }
}

async function slowService(slowMs: number, seconds: number) {
  const service = await startEnrichService({ latencyMs: slowMs });
  const { id, input, env } = await job('b-async-slow');
  const w = await startWorker(env, 16, service.url);
  const rate = ((16 * TASKS) / (slowMs / 1000)) * 100;
  const samples: Array<{ s: number; rssMiB: number; lag: number; produced: number }> = [];
  const poll = await poller();
  const gen = new RunningSumInput({ seed: 4, keys: KEYS });
  try {
    const t0 = performance.now();
    const producing = pace(input, gen, rate, seconds);
    let next = 5000;
    while (performance.now() - t0 < seconds * 1000) {
      await sleep(250);
      if (performance.now() - t0 < next) continue;
      next += 5000;
      const lag = await poll.lag(id, [input]).catch(() => Number.NaN);
      samples.push({
        s: Math.round((performance.now() - t0) / 1000),
        rssMiB: rssBytes(w.child.pid!) / 2 ** 20,
        lag,
        produced: gen.count,
      });
    }
    await producing;
    return { rate, samples };
  } finally {
    await w.kill('SIGTERM');
    await poll.close();
    await service.close();
    await deleteTopicsMatching(id);
  }
}

async function main(): Promise<void> {
  const latencyMs = Number(arg('latency-ms', '5'));
  const levels = arg('concurrency', '1,8,64,256').split(',').map(Number);
  const lines: string[] = [
    `## Async operators, ${new Date().toISOString()}`,
    '',
    `Machine: ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), Node ${process.version}, load average at the start ${loadavg()
      .map((x) => x.toFixed(1))
      .join(', ')}. One worker, ${TASKS} tasks, exactly-once, service latency ${latencyMs} ms.`,
    `Command: \`npx tsc -p . && KAFKA_BROKERS=<broker> node dist/bench/async.js ${process.argv.slice(2).join(' ')}\``,
    '',
    '| service | concurrency | records | steady records/s | bound (c × tasks / latency) | ratio | bare fetch loop, same calls in flight (calls/s) | Sluice / min(bound, bare loop) | time in stage p50 / p99 (ms) |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  let at64 = Number.NaN;
  const row = (label: string, r: Awaited<ReturnType<typeof throughput>>) => {
    lines.push(
      `| ${label} | ${r.concurrency} | ${r.records} | ${r.rate.toFixed(0)} | ${r.bound.toFixed(0)} | ${(r.rate / r.bound).toFixed(2)} | ${r.bare.toFixed(0)} | ${(r.rate / Math.min(r.bound, r.bare)).toFixed(2)} | ${r.p50.toFixed(0)} / ${r.p99.toFixed(0)} |`,
    );
    console.error(lines[lines.length - 1]);
  };
  for (const c of levels) {
    const r = await throughput(latencyMs, c);
    if (c === 64) at64 = r.rate;
    row(`${latencyMs} ms`, r);
  }
  // The scenario: a 20 ms service failing 2 % of calls (retried), at concurrencies whose
  // bound stays below what the HTTP client itself does on this machine.
  for (const c of arg('proof-concurrency', '2,8').split(',').map(Number))
    row('20 ms, 2 % HTTP 500 (retried)', await throughput(20, c, 0.02));
  lines.push(
    '',
    "Under saturation the time in the stage includes the wait for a slot (the input was produced first). The bare loop is fetch calls with the same number in flight, in a process of its own: the HTTP client's own CPU cost is the ceiling on 2 cores.",
  );
  const pacedRate = Math.round((Number.isFinite(at64) ? at64 : 4000) * Number(arg('paced-fraction', '0.5')));
  const p = await paced(latencyMs, pacedRate, Number(arg('paced-seconds', '20')));
  lines.push(
    '',
    `Load average at the end of the throughput runs: ${loadavg()
      .map((x) => x.toFixed(1))
      .join(', ')}.`,
  );
  lines.push(
    '',
    `Added latency at moderate load (concurrency 64, ${p.rate} records/s paced): time in the stage p50 ${p.p50.toFixed(1)} ms, p99 ${p.p99.toFixed(1)} ms (service ${latencyMs} ms).`,
  );
  const slowMs = Number(arg('slow-ms', '2000'));
  const s = await slowService(slowMs, Number(arg('rss-seconds', '60')));
  lines.push(
    '',
    `Service ${slowMs} ms, concurrency 16 (capacity ${((16 * TASKS) / (slowMs / 1000)).toFixed(0)} records/s), input ${s.rate.toFixed(0)} records/s (100×):`,
    '',
    '| s | produced | lag | RSS (MiB) |',
    '|---|---|---|---|',
    ...s.samples.map((x) => `| ${x.s} | ${x.produced} | ${x.lag} | ${x.rssMiB.toFixed(0)} |`),
  );
  const rss = s.samples.map((x) => x.rssMiB).filter(Number.isFinite);
  if (rss.length > 1)
    lines.push(
      '',
      `RSS from ${rss[0]!.toFixed(0)} to ${rss[rss.length - 1]!.toFixed(0)} MiB (max ${Math.max(...rss).toFixed(0)}) while the lag grew to ${s.samples[s.samples.length - 1]!.lag}.`,
    );
  const report = `${lines.join('\n')}\n\n`;
  console.log(report);
  const dir = join(root, 'bench/results');
  mkdirSync(dir, { recursive: true });
  appendFileSync(join(dir, `async-${new Date().toISOString().slice(0, 10)}.md`), report);
}

await main();
