/**
 * Overload benchmark: one worker of the busy fixture job (1 partition, TEST_COST_US per record)
 * under an input rate stepped 0.5x → 2x → 0.5x of its measured capacity, once per overload mode
 * (backpressure, shed, divert). Every second it records the input rate (what the paced producer
 * sent), the processed rate (records processed and kept), the shed rate, and the p99 end-to-end
 * latency of that second's outputs (interpolated in the worker's latency histogram, as
 * Prometheus's histogram_quantile does).
 *
 *   npm run build && KAFKA_BROKERS=127.0.0.1:19392 node dist/bench/overload.js \
 *     [--cost-us 1000] [--spin] [--phase-s 10] [--modes backpressure,shed,divert] [--no-write]
 *
 * Writes docs/overload.svg (hand-written SVG: rates and p99 per mode) and
 * bench/results/overload-<YYYY-MM-DD>.md. `--spin` busy-waits instead of blocking the thread
 * (Atomics.wait), which burns a core per worker. Without KAFKA_BROKERS it starts a local broker
 * on port 19393 and stops it at the end.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { deleteTopicsMatching, eventually, jobTopics } from '../test/helpers/kafka.js';
import { PacedProducer } from '../test/helpers/paced.js';
import { metricSum, spawnWorker, type WorkerProcess } from '../test/helpers/workers.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const MODES = ['backpressure', 'shed', 'divert'] as const;
type Mode = (typeof MODES)[number];

function parseOptions(argv: string[]) {
  const o = {
    costUs: 1000,
    spin: false,
    phaseS: 10,
    modes: [...MODES] as Mode[],
    write: true,
    headroom: 0.9,
    tauMs: 2500,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const num = () => {
      const v = Number(argv[++i]);
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${a} expects a positive number`);
      return v;
    };
    if (a === '--cost-us') o.costUs = num();
    else if (a === '--phase-s') o.phaseS = num();
    else if (a === '--spin') o.spin = true;
    else if (a === '--no-write') o.write = false;
    else if (a === '--modes') {
      const ms = (argv[++i] ?? '').split(',');
      for (const m of ms) if (!MODES.includes(m as Mode)) throw new Error(`unknown mode ${m}`);
      o.modes = ms as Mode[];
    } else throw new Error(`unknown option ${a}`);
  }
  return o;
}

interface Second {
  t: number;
  phase: string;
  input: number;
  processed: number;
  shed: number;
  p99: number | null;
  lag: number;
  capacity: number;
}

interface Scrape {
  at: number;
  sent: number;
  in: number;
  shed: number;
  lag: number;
  capacity: number;
  buckets: number[];
}

async function scrape(w: WorkerProcess, app: string, output: string, p: PacedProducer): Promise<Scrape> {
  const text = await w.metrics();
  const lat = 'sluice_end_to_end_latency_seconds_bucket';
  return {
    at: performance.now(),
    sent: p.sent,
    in: metricSum(text, 'sluice_records_in_total', { app }),
    shed: metricSum(text, 'sluice_records_shed_total', { app }),
    lag: metricSum(text, 'sluice_consumer_lag', { app }),
    capacity: metricSum(text, 'sluice_capacity', { app }),
    buckets: [...LATENCY_BUCKETS.map(String), '+Inf'].map((le) =>
      metricSum(text, lat, { app, topic: output, le }),
    ),
  };
}

/** p99 of the observations between two cumulative histograms, interpolated in its bucket. */
function p99(a: number[], b: number[]): number | null {
  const d = b.map((x, i) => x - a[i]!);
  const total = d[d.length - 1]!;
  if (total <= 0) return null;
  const rank = 0.99 * total;
  for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
    if (d[i]! >= rank) {
      const lo = i === 0 ? 0 : LATENCY_BUCKETS[i - 1]!;
      const prev = i === 0 ? 0 : d[i - 1]!;
      return lo + ((LATENCY_BUCKETS[i]! - lo) * (rank - prev)) / Math.max(1, d[i]! - prev);
    }
  }
  return LATENCY_BUCKETS[LATENCY_BUCKETS.length - 1]!; // beyond the last bound: reported as ≥ 60 s
}

async function runMode(mode: Mode, o: ReturnType<typeof parseOptions>) {
  const { id, input, output, env } = await jobTopics(`bench-ov-${mode}`, 1);
  const w = spawnWorker('busy', {
    name: mode,
    env: {
      ...env,
      TEST_COST_US: String(o.costUs),
      TEST_COST_KIND: o.spin ? 'spin' : 'sleep',
      SLUICE_OVERLOAD_MODE: mode,
      SLUICE_OVERLOAD_HEADROOM: String(o.headroom),
      SLUICE_OVERLOAD_LATENCY_TARGET_MS: String(o.tauMs),
      SLUICE_PROCESSING_MAX_BYTES_PER_PARTITION: '65536',
    },
  });
  const p = new PacedProducer(input, 1);
  try {
    const url = await w.url();
    await eventually(async () => (await fetch(`${url}/readyz`)).status === 200, { timeoutMs: 90_000 });
    // Rates are set relative to the nominal capacity 1e6 / cost (the cost dominates); the table
    // and the plot report what the worker itself measured (`sluice_capacity`).
    const C = 1e6 / o.costUs;
    await p.start(Math.round(0.5 * C));
    await eventually(async () => metricSum(await w.metrics(), 'sluice_capacity', { app: id }) > 0, {
      timeoutMs: 30_000,
    });
    const phases: Array<[string, number, number]> = [
      ['0.5x', 0.5, o.phaseS],
      ['2x', 2, 2 * o.phaseS],
      ['0.5x', 0.5, 1.5 * o.phaseS],
    ];
    const seconds: Second[] = [];
    let prev = await scrape(w, id, output, p);
    const t0 = prev.at;
    for (const [name, factor, dur] of phases) {
      p.setRate(Math.round(factor * C));
      for (let s = 0; s < dur; s++) {
        await new Promise((r) => setTimeout(r, Math.max(0, prev.at + 1000 - performance.now())));
        const cur = await scrape(w, id, output, p);
        const dt = (cur.at - prev.at) / 1000;
        seconds.push({
          t: Math.round((cur.at - t0) / 100) / 10,
          phase: name,
          input: (cur.sent - prev.sent) / dt,
          processed: (cur.in - prev.in - (cur.shed - prev.shed)) / dt,
          shed: (cur.shed - prev.shed) / dt,
          p99: p99(prev.buckets, cur.buckets),
          lag: cur.lag,
          capacity: cur.capacity,
        });
        prev = cur;
      }
    }
    const overloaded = seconds.filter((x) => x.phase === '2x');
    const measured = overloaded.reduce((a, x) => a + x.capacity, 0) / Math.max(1, overloaded.length);
    return { mode, capacity: measured, seconds };
  } finally {
    await p.stop();
    await w.kill('SIGKILL');
    await deleteTopicsMatching(id);
  }
}

// ---------------------------------------------------------------------------------------------
// The plot: one column per mode; rates above, p99 latency below (τ dashed).

function svg(results: Array<Awaited<ReturnType<typeof runMode>>>, tauS: number): string {
  const W = 360;
  const H = 200;
  const padL = 52;
  const padT = 36;
  const gapY = 60;
  const width = padL + results.length * (W + 40) + 10;
  const height = padT + 2 * H + gapY + 70;
  const colors = { input: '#1f77b4', processed: '#2ca02c', shed: '#d62728', p99: '#9467bd' };
  const maxRate = Math.max(
    ...results.flatMap((r) => r.seconds.map((s) => Math.max(s.input, s.processed, s.shed))),
  );
  const rateTop = Math.ceil(maxRate / 500) * 500;
  const maxP99 = Math.max(tauS * 1.5, ...results.flatMap((r) => r.seconds.map((s) => s.p99 ?? 0)));
  const latTop = maxP99 > 20 ? Math.ceil(maxP99 / 10) * 10 : Math.ceil(maxP99);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
  ];
  results.forEach((r, col) => {
    const x0 = padL + col * (W + 40);
    const tMax = Math.max(...r.seconds.map((s) => s.t));
    const X = (t: number) => x0 + (t / tMax) * W;
    const panel = (y0: number, top: number, label: string, ticks: number[]) => {
      out.push(`<rect x="${x0}" y="${y0}" width="${W}" height="${H}" fill="none" stroke="#999"/>`);
      for (const v of ticks) {
        const y = y0 + H - (v / top) * H;
        out.push(`<line x1="${x0 - 4}" y1="${y}" x2="${x0 + W}" y2="${y}" stroke="#eee"/>`);
        out.push(`<text x="${x0 - 6}" y="${y + 4}" text-anchor="end">${v}</text>`);
      }
      out.push(
        `<text x="${x0 - 40}" y="${y0 + H / 2}" transform="rotate(-90 ${x0 - 40} ${y0 + H / 2})" text-anchor="middle">${label}</text>`,
      );
      // phase boundaries
      let last = '';
      for (const s of r.seconds) {
        if (s.phase !== last && last !== '') {
          out.push(
            `<line x1="${X(s.t)}" y1="${y0}" x2="${X(s.t)}" y2="${y0 + H}" stroke="#ccc" stroke-dasharray="3,3"/>`,
          );
        }
        last = s.phase;
      }
      for (let t = 0; t <= tMax; t += 10)
        out.push(`<text x="${X(t)}" y="${y0 + H + 14}" text-anchor="middle">${t}</text>`);
    };
    const line = (y0: number, top: number, pick: (s: Second) => number | null, color: string, dash = '') => {
      const pts = r.seconds
        .filter((s) => pick(s) !== null)
        .map((s) => `${X(s.t).toFixed(1)},${(y0 + H - (Math.min(top, pick(s)!) / top) * H).toFixed(1)}`);
      out.push(
        `<polyline fill="none" stroke="${color}" stroke-width="1.6"${dash ? ` stroke-dasharray="${dash}"` : ''} points="${pts.join(' ')}"/>`,
      );
    };
    const yR = padT;
    const yL = padT + H + gapY;
    out.push(
      `<text x="${x0 + W / 2}" y="${padT - 18}" text-anchor="middle" font-size="13" font-weight="bold">${r.mode} (measured C ≈ ${Math.round(r.capacity)} rec/s at 2x)</text>`,
    );
    panel(yR, rateTop, 'records/s', [0, rateTop / 4, rateTop / 2, (3 * rateTop) / 4, rateTop]);
    line(yR, rateTop, (s) => s.input, colors.input);
    line(yR, rateTop, (s) => s.processed, colors.processed);
    line(yR, rateTop, (s) => s.shed, colors.shed);
    panel(
      yL,
      latTop,
      'p99 latency (s)',
      [0, latTop / 4, latTop / 2, (3 * latTop) / 4, latTop].map((v) => Math.round(v * 100) / 100),
    );
    const tauY = yL + H - (tauS / latTop) * H;
    out.push(
      `<line x1="${x0}" y1="${tauY}" x2="${x0 + W}" y2="${tauY}" stroke="#ff7f0e" stroke-dasharray="6,4"/>`,
    );
    out.push(`<text x="${x0 + W - 4}" y="${tauY - 4}" text-anchor="end" fill="#ff7f0e">τ = ${tauS} s</text>`);
    line(yL, latTop, (s) => s.p99, colors.p99);
    out.push(
      `<text x="${x0 + W / 2}" y="${yL + H + 28}" text-anchor="middle">seconds (input 0.5x → 2x → 0.5x of C)</text>`,
    );
  });
  const ly = height - 16;
  const legend: Array<[string, string]> = [
    ['input rate', colors.input],
    ['processed (kept) rate', colors.processed],
    ['shed rate', colors.shed],
    ['p99 end-to-end latency', colors.p99],
  ];
  legend.forEach(([name, c], i) => {
    const x = padL + i * 190;
    out.push(`<line x1="${x}" y1="${ly}" x2="${x + 24}" y2="${ly}" stroke="${c}" stroke-width="2"/>`);
    out.push(`<text x="${x + 30}" y="${ly + 4}">${name}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

function markdown(
  results: Array<Awaited<ReturnType<typeof runMode>>>,
  o: ReturnType<typeof parseOptions>,
  cmd: string,
): string {
  const f = (x: number | null, d = 0) => (x === null ? '–' : x.toFixed(d));
  const lines = [
    `# Overload benchmark, ${new Date().toISOString().slice(0, 10)}`,
    '',
    `Command: \`${cmd}\``,
    '',
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, shared with other work; Node ${process.version}.`,
    `One worker, 1 partition, busy job with ${o.costUs} µs per record (${o.spin ? 'busy-wait' : 'Atomics.wait'}),`,
    `H = ${o.headroom}, τ = ${o.tauMs} ms, fetches of 64 KiB. Phases: 0.5x the nominal capacity 1e6/cost for ${o.phaseS} s, 2x for ${2 * o.phaseS} s, 0.5x for ${1.5 * o.phaseS} s`,
    '(the input rate is what the paced producer achieved on the shared machine). Latency histogram',
    'buckets end at 2.5, 5, 10, 30, 60 s: p99 above 2.5 s is interpolated between them. In backpressure',
    'mode a kept fraction above 1 is the backlog draining.',
    '',
    '## Per phase',
    '',
    'Rates, C and the kept fraction (processed / input) are means over the second half of each',
    'phase (settled); "p99 settled" is the worst one-second p99 in that half, "p99 worst" the worst',
    "in the whole phase (the step included). C is the worker's own `sluice_capacity` gauge.",
    '',
    '| mode | phase | input/s | processed/s | shed/s | C (rec/s) | kept fraction | H·C/λ | p99 settled (s) | p99 worst (s) | lag at end |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const r of results) {
    let i = 0;
    const groups: Second[][] = [];
    for (const s of r.seconds) {
      if (i === 0 || r.seconds[i - 1]!.phase !== s.phase) groups.push([]);
      groups[groups.length - 1]!.push(s);
      i++;
    }
    groups.forEach((g) => {
      const body = g.slice(Math.floor(g.length / 2));
      const mean = (k: 'input' | 'processed' | 'shed' | 'capacity') =>
        body.reduce((a, s) => a + s[k], 0) / body.length;
      const inp = mean('input');
      const kept = (mean('processed') / Math.max(1, inp)).toFixed(3);
      const worstOf = (xs: Second[]) =>
        xs.reduce<number | null>((a, s) => (s.p99 === null ? a : Math.max(a ?? 0, s.p99)), null);
      const expect = Math.min(1, (o.headroom * mean('capacity')) / inp).toFixed(3);
      lines.push(
        `| ${r.mode} | ${g[0]!.phase} | ${f(inp)} | ${f(mean('processed'))} | ${f(mean('shed'))} | ${f(mean('capacity'))} | ${kept} | ${expect} | ${f(worstOf(body), 2)} | ${f(worstOf(g), 2)} | ${g[g.length - 1]!.lag} |`,
      );
    });
  }
  lines.push('', '![overload](../../docs/overload.svg)', '', '## Every second', '');
  for (const r of results) {
    lines.push(
      `### ${r.mode}`,
      '',
      '| t (s) | phase | input/s | processed/s | shed/s | p99 (s) | lag | C |',
      '| --- | --- | --- | --- | --- | --- | --- | --- |',
    );
    for (const s of r.seconds)
      lines.push(
        `| ${s.t} | ${s.phase} | ${f(s.input)} | ${f(s.processed)} | ${f(s.shed)} | ${f(s.p99, 3)} | ${s.lag} | ${f(s.capacity)} |`,
      );
    lines.push('');
  }
  return `${lines.join('\n')}\n`;
}

async function main() {
  const o = parseOptions(process.argv.slice(2));
  let started = false;
  if (!process.env.KAFKA_BROKERS) {
    execFileSync(process.execPath, [join(root, 'bin/sluice.js'), 'kafka', 'start', '--port', '19393'], {
      stdio: 'inherit',
    });
    process.env.KAFKA_BROKERS = '127.0.0.1:19393';
    started = true;
  }
  try {
    const results = [];
    for (const mode of o.modes) {
      process.stderr.write(`mode ${mode}…\n`);
      results.push(await runMode(mode, o));
    }
    const cmd = `node dist/bench/overload.js ${process.argv.slice(2).join(' ')}`.trim();
    const md = markdown(results, o, cmd);
    process.stdout.write(md.split('\n## Every second')[0]!);
    if (o.write) {
      writeFileSync(join(root, 'docs/overload.svg'), svg(results, o.tauMs / 1000));
      mkdirSync(join(root, 'bench/results'), { recursive: true });
      const file = join(root, `bench/results/overload-${new Date().toISOString().slice(0, 10)}.md`);
      writeFileSync(file, md);
      process.stderr.write(`wrote docs/overload.svg and ${file}\n`);
    }
  } finally {
    if (started)
      execFileSync(process.execPath, [join(root, 'bin/sluice.js'), 'kafka', 'stop', '--port', '19393'], {
        stdio: 'inherit',
      });
  }
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`${e?.stack ?? e}\n`);
  process.exit(1);
});
