/**
 * Reading a Sluice worker's /metrics in benchmarks: samples of the Prometheus text format, the
 * difference of two scrapes (what happened between them), a histogram's quantile.
 */

/** One scrape: sample name with its labels as written (`name{a="b"}`) → value. */
export type Scrape = Map<string, number>;

export function parseMetrics(text: string): Scrape {
  const out: Scrape = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const cut = line.lastIndexOf(' ');
    if (cut <= 0) continue;
    out.set(line.slice(0, cut), Number(line.slice(cut + 1)));
  }
  return out;
}

export async function scrape(url: string): Promise<Scrape> {
  const r = await fetch(url, { signal: AbortSignal.timeout(5000) });
  return parseMetrics(await r.text());
}

/** `to − from` per sample (counters and histograms: what happened in between). */
export function since(from: Scrape, to: Scrape): Scrape {
  const out: Scrape = new Map();
  for (const [k, v] of to) out.set(k, v - (from.get(k) ?? 0));
  return out;
}

/** Sum over every label set of a sample name (`name` or `name{...}`). */
export function total(s: Scrape, name: string): number {
  let n = 0;
  for (const [k, v] of s) if (k === name || k.startsWith(`${name}{`)) n += v;
  return n;
}

/**
 * Quantile `q` of a histogram summed over its label sets (those with every label of `only`),
 * linear within a bucket (as Prometheus' histogram_quantile); NaN when it counted nothing.
 */
export function histogramQuantile(
  s: Scrape,
  name: string,
  q: number,
  only: Record<string, string> = {},
): number {
  const byLe = new Map<number, number>();
  const prefix = `${name}_bucket{`;
  const wanted = Object.entries(only).map(([l, v]) => `${l}="${v}"`);
  for (const [k, v] of s) {
    if (!k.startsWith(prefix) || !wanted.every((w) => k.includes(w))) continue;
    const m = /le="([^"]+)"/.exec(k);
    if (!m) continue;
    const le = m[1] === '+Inf' ? Number.POSITIVE_INFINITY : Number(m[1]);
    byLe.set(le, (byLe.get(le) ?? 0) + v);
  }
  const buckets = [...byLe].sort((a, b) => a[0] - b[0]);
  const count = buckets[buckets.length - 1]?.[1] ?? 0;
  if (count === 0) return Number.NaN;
  let prev: [number, number] = [0, 0];
  for (const b of buckets) {
    if (b[1] >= q * count) {
      if (!Number.isFinite(b[0])) return prev[0];
      return prev[0] + ((q * count - prev[1]) / Math.max(1, b[1] - prev[1])) * (b[0] - prev[0]);
    }
    prev = b;
  }
  return Number.NaN;
}
