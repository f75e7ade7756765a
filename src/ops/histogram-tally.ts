/**
 * Observations of one prom-client histogram series, counted locally and added to the series in
 * one step. prom-client 15's `observe` checks the labels, builds the series' hash string and
 * walks the bucket bounds on every call; the end-to-end latency histogram took one call per
 * output record at each checkpoint, about 2–4 % of a worker's busy CPU in the keyed running sum
 * (bench/cpu.ts). Here a value costs a binary search over the same bounds (`value <= bound`, as
 * prom-client decides) and two additions; {@link HistogramTally.foldInto} then adds the bucket
 * counts, the sum and the count to the series prom-client exports, so /metrics shows the same
 * buckets and count as one `observe` per value (test/unit/ops/histogram-tally.test.ts compares
 * the exposition text), and a sum equal up to floating-point rounding order.
 *
 * That reaches into prom-client's series record (`hashMap` entries with `bucketValues`, `sum`,
 * `count`, and `upperBounds`); when a prom-client version does not have that shape, the tally
 * keeps the values and observes them one by one instead.
 */
import type { Histogram } from 'prom-client';

interface Series {
  labels: Record<string, string | number>;
  bucketValues: Record<string, number>;
  sum: number;
  count: number;
}
interface Internals {
  upperBounds?: unknown;
  hashMap?: Record<string, Series>;
}

type Labels = Record<string, string | number>;

/** prom-client's record of one label set, made (zeroed) when it has none yet. */
function seriesOf(h: Histogram<string>, labels: Labels): Series | undefined {
  const find = (): Series | undefined => {
    const map = (h as unknown as Internals).hashMap;
    if (map === undefined) return undefined;
    const names = Object.keys(labels);
    for (const k in map) {
      const s = map[k]!;
      const l = s.labels;
      if (l === undefined || Object.keys(l).length !== names.length) continue;
      let same = true;
      for (const n of names) if (String(l[n]) !== String(labels[n])) same = false;
      if (same) return s;
    }
    return undefined;
  };
  const s = find();
  if (s !== undefined) return s;
  h.zero(labels);
  return find();
}

function usable(h: Histogram<string>): number[] | undefined {
  const i = h as unknown as Internals;
  const b = i.upperBounds;
  if (!Array.isArray(b) || typeof i.hashMap !== 'object' || i.hashMap === null) return undefined;
  if (!b.every((x) => typeof x === 'number')) return undefined;
  return b as number[];
}

export class HistogramTally {
  readonly #h: Histogram<string>;
  readonly #bounds: number[] | undefined;
  readonly #counts: Float64Array;
  /** Only when prom-client's internals are not the expected ones. */
  readonly #values: number[] = [];
  #sum = 0;
  #count = 0;

  constructor(h: Histogram<string>) {
    this.#h = h;
    this.#bounds = usable(h);
    this.#counts = new Float64Array(this.#bounds?.length ?? 0);
  }

  /** One observation (a finite number, as prom-client requires). */
  add(v: number): void {
    if (!Number.isFinite(v)) throw new TypeError(`Value is not a valid number: ${v}`);
    const bounds = this.#bounds;
    if (bounds === undefined) {
      this.#values.push(v);
      return;
    }
    // The first bound with v <= bound; beyond the last, only the count (+Inf) and the sum.
    let lo = 0;
    let hi = bounds.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (v <= bounds[mid]!) hi = mid;
      else lo = mid + 1;
    }
    if (lo < bounds.length) this.#counts[lo]!++;
    this.#sum += v;
    this.#count++;
  }

  /** Adds what was observed since the last fold to the series of `labels`, and starts over. */
  foldInto(labels: Labels): void {
    const h = this.#h;
    if (this.#bounds === undefined) {
      const child = h.labels(labels);
      for (const v of this.#values) child.observe(v);
      this.#values.length = 0;
      return;
    }
    if (this.#count === 0) return;
    const s = seriesOf(h, labels);
    if (s === undefined) throw new Error(`prom-client histogram: no series for ${JSON.stringify(labels)}`);
    const bounds = this.#bounds;
    const counts = this.#counts;
    for (let i = 0; i < bounds.length; i++) {
      if (counts[i] === 0) continue;
      s.bucketValues[bounds[i]!] = (s.bucketValues[bounds[i]!] ?? 0) + counts[i]!;
      counts[i] = 0;
    }
    s.sum += this.#sum;
    s.count += this.#count;
    this.#sum = 0;
    this.#count = 0;
  }
}
