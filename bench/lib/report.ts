/** The results file of bench/run.ts: markdown tables and a hand-written SVG bar chart. */

export interface RunResult {
  workload: string;
  system: string;
  guarantee: string;
  records: number;
  recordsOut: number;
  seconds: number;
  throughput: number;
  /** rate over the last 75 % of the input (after warm-up) */
  warmThroughput?: number;
  cpuPerMillion: number;
  hwmBytes: number;
  startSeconds: number;
  p50?: number;
  p99?: number;
  latencySamples?: number;
  rate?: number;
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
 * Grouped horizontal bars: one group per workload, one bar per series (system + guarantee),
 * throughput in records/s on a linear axis; the kafkajs ceiling is a dashed line.
 */
export function svgChart(results: RunResult[], title: string): string {
  const ok = results.filter((r) => !r.error && Number.isFinite(r.throughput));
  const ceiling = ok.find((r) => r.system === 'kafkajs-ceiling');
  const bars = ok.filter((r) => r.system !== 'kafkajs-ceiling');
  const workloads = [...new Set(bars.map((r) => r.workload))];
  const series = [...new Set(bars.map((r) => `${r.system} ${r.guarantee}`))].sort();
  const colors = ['#1f77b4', '#aec7e8', '#d62728', '#ff9896', '#2ca02c', '#98df8a'];
  const max = Math.max(1, ...bars.map((r) => r.throughput), ceiling?.throughput ?? 0) * 1.08;
  const left = 190;
  const width = 860;
  const plotW = width - left - 30;
  const barH = 11;
  const groupGap = 10;
  const top = 56;
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
    const lx = left + i * 170;
    out.push(`<rect x="${lx}" y="28" width="12" height="10" fill="${colors[i % colors.length]}"/>`);
    out.push(`<text x="${lx + 16}" y="37">${esc(s)}</text>`);
  });
  // grid
  const step = niceStep(max / 5);
  for (let v = 0; v <= max; v += step) {
    out.push(`<line x1="${x(v)}" y1="${top - 4}" x2="${x(v)}" y2="${top + plotH}" stroke="#ddd"/>`);
    out.push(`<text x="${x(v)}" y="${top + plotH + 14}" text-anchor="middle">${fmt(v)}</text>`);
  }
  out.push(
    `<text x="${left + plotW / 2}" y="${top + plotH + 32}" text-anchor="middle">records/s (input fully consumed, first to last output)</text>`,
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
  if (ceiling) {
    const cx = x(ceiling.throughput);
    out.push(
      `<line x1="${cx}" y1="${top - 4}" x2="${cx}" y2="${top + plotH}" stroke="#555" stroke-dasharray="4 3"/>`,
    );
    out.push(
      `<text x="${cx - 4}" y="${top + plotH - 4}" text-anchor="end" fill="#555">kafkajs decode-only ceiling ${fmt(ceiling.throughput)}</text>`,
    );
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

function niceStep(raw: number): number {
  const p = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}
