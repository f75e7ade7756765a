/** The results file of bench/run.ts: markdown tables and a hand-written SVG bar chart. */

export interface RunResult {
  workload: string;
  system: string;
  guarantee: string;
  /** Kafka Streams' record cache (statestore.cache.max.bytes): "off" or its size; "—" for others */
  ksCache: string;
  records: number;
  /** committed output records, counted by a read_committed reader after the run */
  recordsOut: number;
  seconds: number;
  /** records / (last − first output) */
  throughput: number;
  /** the headline: records/s between 10 % and 90 % of the input committed */
  steadyThroughput: number;
  cpuPerMillion: number;
  hwmBytes: number;
  startSeconds: number;
  /** how many committed-offset samples the run took */
  samples?: number;
  error?: string;
}

export interface RecoveryResult {
  system: string;
  keys: number;
  processSeconds: number;
  extraRecords: number;
  resumeSeconds: number;
  lagZeroSeconds: number;
  error?: string;
}

export const fmt = (n: number | undefined, digits = 0) =>
  n === undefined || !Number.isFinite(n)
    ? '—'
    : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * Grouped horizontal bars: one group per workload, one bar per series (system + guarantee), the
 * headline rate (10 % → 90 % committed) in records/s on a linear axis; the client ceilings are
 * one more group.
 */
export function svgChart(results: RunResult[], title: string): string {
  const ok = results
    .filter((r) => !r.error && Number.isFinite(r.steadyThroughput))
    .map((r) => ({ ...r, throughput: r.steadyThroughput }));
  const bars = ok;
  const workloads = [...new Set(bars.map((r) => r.workload))];
  const series = [...new Set(bars.map((r) => `${r.system} ${r.guarantee}`))].sort();
  const colors = [
    '#1f77b4',
    '#aec7e8',
    '#d62728',
    '#ff9896',
    '#2ca02c',
    '#98df8a',
    '#9467bd',
    '#8c564b',
    '#e377c2',
  ];
  const max = Math.max(1, ...bars.map((r) => r.throughput)) * 1.08;
  const left = 230;
  const width = 860;
  const plotW = width - left - 30;
  const barH = 11;
  const groupGap = 10;
  const top = 44 + Math.ceil(series.length / 3) * 14;
  const groupH = (r: string) => bars.filter((b) => b.workload === r).length * barH + groupGap;
  const plotH = workloads.reduce((s, w) => s + groupH(w), 0);
  const height = top + plotH + 50 + series.length * 0;
  const x = (v: number) => left + (v / max) * plotW;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
  );
  out.push(`<rect width="100%" height="100%" fill="white"/>`);
  out.push(`<text x="${left}" y="18" font-size="14" font-weight="bold">${esc(title)}</text>`);
  series.forEach((s, i) => {
    const lx = left + (i % 3) * 210;
    const ly = 28 + Math.floor(i / 3) * 14;
    out.push(`<rect x="${lx}" y="${ly}" width="12" height="10" fill="${colors[i % colors.length]}"/>`);
    out.push(`<text x="${lx + 16}" y="${ly + 9}" font-size="10">${esc(s.replace(/ —$/, ''))}</text>`);
  });
  // grid
  const step = niceStep(max / 5);
  for (let v = 0; v <= max; v += step) {
    out.push(`<line x1="${x(v)}" y1="${top - 4}" x2="${x(v)}" y2="${top + plotH}" stroke="#ddd"/>`);
    out.push(`<text x="${x(v)}" y="${top + plotH + 14}" text-anchor="middle">${fmt(v)}</text>`);
  }
  out.push(
    `<text x="${left + plotW / 2}" y="${top + plotH + 32}" text-anchor="middle">records/s between 10 % and 90 % of the input committed</text>`,
  );
  let y = top;
  for (const w of workloads) {
    const rows = bars
      .filter((b) => b.workload === w)
      .sort((a, b) => (`${a.system} ${a.guarantee}` < `${b.system} ${b.guarantee}` ? -1 : 1));
    out.push(
      `<text x="${left - 6}" y="${y + (rows.length * barH) / 2 + 4}" text-anchor="end">${esc(w)}</text>`,
    );
    for (const r of rows) {
      const i = series.indexOf(`${r.system} ${r.guarantee}`);
      out.push(
        `<rect x="${left}" y="${y}" width="${Math.max(1, x(r.throughput) - left)}" height="${barH - 2}" fill="${colors[i % colors.length]}"/>`,
      );
      out.push(
        `<text x="${x(r.throughput) + 3}" y="${y + barH - 3}" font-size="9">${fmt(r.throughput)}</text>`,
      );
      y += barH;
    }
    y += groupGap;
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

function niceStep(raw: number): number {
  const p = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

export interface LineSeries {
  name: string;
  color: string;
  dashed?: boolean;
  /** [x, y] points; y ≤ 0 or NaN is left out */
  points: Array<[number, number]>;
}

/**
 * Lines on a linear x axis and a logarithmic y axis (latencies from tens of ms to seconds), with
 * a legend: the latency bench's p50/p99 against load.
 */
export function svgLineChart(
  series: LineSeries[],
  o: { title: string; xLabel: string; yLabel: string },
): string {
  const width = 760;
  const height = 440;
  const left = 70;
  const right = 200;
  const top = 40;
  const bottom = 50;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const pts = series.flatMap((s) => s.points).filter(([, y]) => Number.isFinite(y) && y > 0);
  const xMax = Math.max(1, ...pts.map(([x]) => x)) * 1.05;
  const yMin = 10 ** Math.floor(Math.log10(Math.max(1, Math.min(...pts.map(([, y]) => y), 1e9))));
  const yMax = 10 ** Math.ceil(Math.log10(Math.max(10, ...pts.map(([, y]) => y))));
  const x = (v: number) => left + (v / xMax) * plotW;
  const y = (v: number) =>
    top + plotH - ((Math.log10(v) - Math.log10(yMin)) / (Math.log10(yMax) - Math.log10(yMin))) * plotH;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
  );
  out.push(`<rect width="100%" height="100%" fill="white"/>`);
  out.push(`<text x="${left}" y="20" font-size="14" font-weight="bold">${esc(o.title)}</text>`);
  for (let d = yMin; d <= yMax; d *= 10)
    for (const m of [1, 2, 5]) {
      const v = d * m;
      if (v > yMax) break;
      out.push(
        `<line x1="${left}" y1="${y(v)}" x2="${left + plotW}" y2="${y(v)}" stroke="${m === 1 ? '#ccc' : '#eee'}"/>`,
      );
      out.push(`<text x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${fmt(v)}</text>`);
    }
  const step = niceStep(xMax / 6);
  for (let v = 0; v <= xMax; v += step) {
    out.push(`<line x1="${x(v)}" y1="${top}" x2="${x(v)}" y2="${top + plotH}" stroke="#eee"/>`);
    out.push(`<text x="${x(v)}" y="${top + plotH + 14}" text-anchor="middle">${fmt(v)}</text>`);
  }
  out.push(`<text x="${left + plotW / 2}" y="${height - 12}" text-anchor="middle">${esc(o.xLabel)}</text>`);
  out.push(
    `<text x="16" y="${top + plotH / 2}" text-anchor="middle" transform="rotate(-90 16 ${top + plotH / 2})">${esc(o.yLabel)}</text>`,
  );
  series.forEach((s, i) => {
    const p = s.points.filter(([, v]) => Number.isFinite(v) && v > 0).sort((a, b) => a[0] - b[0]);
    const dash = s.dashed ? ' stroke-dasharray="5 3"' : '';
    if (p.length > 1)
      out.push(
        `<polyline fill="none" stroke="${s.color}" stroke-width="2"${dash} points="${p.map(([a, b]) => `${x(a).toFixed(1)},${y(b).toFixed(1)}`).join(' ')}"/>`,
      );
    for (const [a, b] of p)
      out.push(`<circle cx="${x(a).toFixed(1)}" cy="${y(b).toFixed(1)}" r="3" fill="${s.color}"/>`);
    const ly = top + 10 + i * 16;
    out.push(
      `<line x1="${left + plotW + 12}" y1="${ly}" x2="${left + plotW + 34}" y2="${ly}" stroke="${s.color}" stroke-width="2"${dash}/>`,
    );
    out.push(`<text x="${left + plotW + 38}" y="${ly + 4}">${esc(s.name)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/** The npm command that gave a report, as typed: `npm run <script> -- [--node N] <args>`. */
export function benchCommand(script: string): string {
  const args = process.argv.slice(2);
  const node = process.env.BENCH_NODE_MAJOR;
  if (node !== undefined) args.unshift('--node', node);
  return `npm run ${script}${args.length ? ` -- ${args.join(' ')}` : ''}`;
}
