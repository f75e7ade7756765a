/**
 * Deterministic bench input: every record is a function of (workload seed, index), so two runs
 * (and the two systems) read byte-identical topics. Values are JSON of 130–160 bytes.
 */

import { prng } from '../examples/load-generator.js';

export { prng };

export interface BenchEvent {
  user: string;
  page: string;
  kind: 'view' | 'click' | 'buy';
  amount: number;
  seq: number;
  pad: string;
}

/**
 * Zipf(s) over ranks 0..n-1 by inverting the cumulative distribution (binary search on a
 * precomputed CDF: 8 bytes per key, 8 MB for 1e6 keys).
 */
export function zipf(n: number, s: number, rand: () => number): () => number {
  const cdf = new Float64Array(n);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    sum += 1 / (i + 1) ** s;
    cdf[i] = sum;
  }
  for (let i = 0; i < n; i++) cdf[i]! /= sum;
  return () => {
    const u = rand();
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cdf[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

const KINDS = ['view', 'view', 'click', 'buy'] as const;
const PAD = 'x'.repeat(60);

export type KeyDist = { keys: number; dist: 'uniform' | 'zipf' | 'sequential' };

/** Makes the i-th record of a stream: key = the user; the key's index comes from `nextKey`. */
export function eventMaker(seed: number, d: KeyDist): (i: number) => { key: string; value: string } {
  const rand = prng(seed);
  const pick =
    d.dist === 'zipf'
      ? zipf(d.keys, 1.1, rand)
      : d.dist === 'uniform'
        ? () => Math.floor(rand() * d.keys)
        : undefined;
  return (i) => {
    const k = pick ? pick() : i % d.keys;
    const user = `u${k}`;
    const e: BenchEvent = {
      user,
      page: `/p/${(i * 7919) % 1000}`,
      kind: KINDS[i & 3]!,
      amount: (i * 31) % 500,
      seq: i,
      pad: PAD,
    };
    return { key: user, value: JSON.stringify(e) };
  };
}

/** A row of the join's table topic: one per user. */
export function userRow(k: number): { key: string; value: string } {
  const tiers = ['free', 'pro', 'team', 'enterprise'];
  return {
    key: `u${k}`,
    value: JSON.stringify({
      user: `u${k}`,
      name: `User ${k}`,
      tier: tiers[k % 4],
      region: `r${k % 16}`,
      pad: PAD,
    }),
  };
}
