/**
 * Pure helpers of the bench's numbers (unit-tested in test/unit/bench-steady.test.ts): the
 * steady-state rate from samples of a group's committed offsets, percentiles, and the check that
 * two systems wrote the same number of outputs.
 */

/** One sample of a run: when (ms, performance.now(); the middle of the request) and how many input records were committed. */
export interface CommitSample {
  at: number;
  committed: number;
}

/**
 * The time (ms) at which `target` records were committed, interpolated linearly between the last
 * sample below it and the first at or above it; NaN when the samples do not bracket it (the first
 * sample is already at or above `target`, or no sample reaches it).
 */
export function timeAt(samples: readonly CommitSample[], target: number): number {
  for (let i = 1; i < samples.length; i++) {
    const b = samples[i]!;
    if (b.committed < target) continue;
    const a = samples[i - 1]!;
    if (a.committed >= target) return Number.NaN;
    return a.at + ((target - a.committed) / (b.committed - a.committed)) * (b.at - a.at);
  }
  return Number.NaN;
}

/**
 * Records/s between `lo` and `hi` (fractions of `total`) of the input committed: the headline rate,
 * which leaves out start-up, JIT warm-up and the first batch read before any commit, and the tail.
 */
export function steadyRate(samples: readonly CommitSample[], total: number, lo = 0.1, hi = 0.9): number {
  const t0 = timeAt(samples, lo * total);
  const t1 = timeAt(samples, hi * total);
  if (!(t1 > t0)) return Number.NaN;
  return ((hi - lo) * total) / ((t1 - t0) / 1000);
}

export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

/**
 * Compares the outputs of the systems that ran one workload under one guarantee: `ok` when every
 * count is known and equal (and equal to `expected` when the workload knows it), else a sentence
 * that says which differ.
 */
export function outputsCheck(
  counts: ReadonlyArray<{ system: string; recordsOut: number }>,
  expected?: number,
): { ok: boolean; message: string } {
  const known = counts.filter((c) => Number.isFinite(c.recordsOut));
  const list = counts
    .map((c) => `${c.system} ${Number.isFinite(c.recordsOut) ? c.recordsOut : 'unknown'}`)
    .join(', ');
  if (known.length < counts.length) return { ok: false, message: `outputs not counted: ${list}` };
  const values = new Set(known.map((c) => c.recordsOut));
  if (values.size > 1) return { ok: false, message: `outputs differ: ${list}` };
  if (expected !== undefined && known.length > 0 && known[0]!.recordsOut !== expected)
    return { ok: false, message: `outputs ${list}, expected ${expected}` };
  return { ok: true, message: `equal (${known[0]?.recordsOut ?? 0})` };
}
