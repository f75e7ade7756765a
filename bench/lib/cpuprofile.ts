/**
 * The table of a V8 CPU profile (`node --cpu-prof`): the functions and the files or packages with
 * the most self time, idle and "(program)" left out (bench/profile.ts, bench/cpu.ts --profile).
 */
import { relative } from 'node:path';
import { root } from './procs.js';

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

function short(url: string): string {
  if (!url) return '(native)';
  const p = url.replace(/^file:\/\//, '');
  const r = relative(root, p);
  return r.startsWith('..') ? p : r;
}

export function summarize(
  profile: { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] },
  top = 25,
): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  let total = 0;
  const fn = new Map<string, number>();
  const file = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const name = n.callFrame.functionName || '(anonymous)';
    if (name === '(idle)' || name === '(program)') continue;
    total += us;
    const where = short(n.callFrame.url);
    const key = `${name} — ${where}${n.callFrame.url ? `:${n.callFrame.lineNumber + 1}` : ''}`;
    fn.set(key, (fn.get(key) ?? 0) + us);
    const group = where.startsWith('dist/src/')
      ? where
      : where.includes('node_modules/')
        ? `node_modules/${where
            .split('node_modules/')[1]!
            .split('/')
            .slice(0, where.includes('@') ? 2 : 1)
            .join('/')}`
        : where.startsWith('node:')
          ? 'node: built-ins'
          : where === '(native)'
            ? `(native) ${name}`
            : where;
    file.set(group, (file.get(group) ?? 0) + us);
  }
  const L: string[] = [];
  L.push(`Busy CPU in the profile: ${(total / 1e6).toFixed(2)} s (idle and "(program)" left out).`, '');
  L.push('| self time (s) | share | function — file:line |', '|---:|---:|---|');
  for (const [k, us] of [...fn].sort((a, b) => b[1] - a[1]).slice(0, top))
    L.push(
      `| ${(us / 1e6).toFixed(2)} | ${((us / total) * 100).toFixed(1)} % | ${k.replace(/\|/g, '\\|')} |`,
    );
  L.push('', '| self time (s) | share | file or package |', '|---:|---:|---|');
  for (const [k, us] of [...file].sort((a, b) => b[1] - a[1]).slice(0, 15))
    L.push(
      `| ${(us / 1e6).toFixed(2)} | ${((us / total) * 100).toFixed(1)} % | ${k.replace(/\|/g, '\\|')} |`,
    );
  return L.join('\n');
}
