/**
 * "Did you mean" for names a user typed: topics, config keys, env names, commands. Pure.
 */

/**
 * Edit distance between two strings: insertions, deletions, substitutions and swaps of two
 * neighbouring characters each cost 1 (optimal string alignment), so `oders` → `orders` and
 * `gaurantee` → `guarantee` are 1.
 */
export function editDistance(a: string, b: string): number {
  if (a === b) return 0;
  if (a.length === 0) return b.length;
  if (b.length === 0) return a.length;
  let prev2: number[] = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, prev2[j - 2]! + 1);
      row.push(d);
    }
    prev2 = prev;
    prev = row;
  }
  return prev[b.length]!;
}

/** How far a name may be from a candidate to be suggested: 1 for names of up to 4 characters, else 2. */
export function maxSuggestDistance(name: string): number {
  return name.length <= 4 ? 1 : 2;
}

/**
 * The candidate closest to `name` (case-insensitively; a difference in case alone counts as
 * close), if one is within {@link maxSuggestDistance}; never `name` itself. Ties go to the
 * first candidate.
 */
export function closest(name: string, candidates: Iterable<string>): string | undefined {
  const lower = name.toLowerCase();
  const max = maxSuggestDistance(name);
  let best: string | undefined;
  let bestD = Number.POSITIVE_INFINITY;
  for (const c of candidates) {
    if (c === name) continue;
    const d = editDistance(lower, c.toLowerCase());
    if (d <= max && d < bestD) {
      best = c;
      bestD = d;
    }
  }
  return best;
}

/** ` (did you mean "x"?)` for the closest candidate, or '' when none is close. */
export function didYouMean(name: string, candidates: Iterable<string>): string {
  const c = closest(name, candidates);
  return c === undefined ? '' : ` (did you mean ${JSON.stringify(c)}?)`;
}

/**
 * The names about to be created that are close to one that exists (`oders` next to `orders`),
 * each with the existing name: most likely a typo in a job or a command line.
 */
export function closeToExisting(
  toCreate: readonly string[],
  existing: readonly string[],
): Array<{ name: string; similar: string }> {
  const present = new Set(existing);
  const out: Array<{ name: string; similar: string }> = [];
  for (const name of toCreate) {
    if (present.has(name)) continue;
    const similar = closest(name, existing);
    if (similar !== undefined) out.push({ name, similar });
  }
  return out;
}

/** The warning line for one {@link closeToExisting} pair. */
export function typoWarning(p: { name: string; similar: string }): string {
  return `warning: creating topic ${JSON.stringify(p.name)}, but ${JSON.stringify(p.similar)} exists: a typo?`;
}
