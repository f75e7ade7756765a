/**
 * The package as a team gets it: `npm pack` of this repository (dist/ built by the test command;
 * prepack's rebuild is skipped so the other test files keep their dist/src), installed from the
 * tarball into a fresh ES-module project and a fresh `npm init -y` (CommonJS) project, each with
 * a TypeScript job that imports 'sluice', type-checked under `strict` with this repository's
 * TypeScript, then run with `npx sluice run job.ts` against the test broker: records in, records
 * out, and a SIGTERM to npx must stop the worker (npm's shell dies without passing it on).
 * Installs come from the npm cache that `npm ci` filled (--prefer-offline).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { commandLine, isAlive } from '../../src/dev/broker-process.js';
import {
  brokers,
  createTopics,
  deleteTopicsMatching,
  eventually,
  produce,
  readAll,
  uniqueName,
} from '../helpers/kafka.js';

// Compiled to dist/test/integration/, so the repository root is three folders up.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const require = createRequire(import.meta.url);
const versionOf = (pkg: string): string => require(`${pkg}/package.json`).version;

/** The environment without what `npm test` exports to its children (npm_config_*, npm_command…). */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
  return { ...env, ...extra };
}

interface Done {
  code: number | null;
  out: string;
}

/** Runs a command to its end; stdout and stderr together. */
function run(cmd: string, args: string[], cwd: string, env = cleanEnv()): Promise<Done> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, out }));
  });
}

async function ok(cmd: string, args: string[], cwd: string): Promise<string> {
  const r = await run(cmd, args, cwd);
  assert.equal(r.code, 0, `${cmd} ${args.join(' ')} in ${cwd} exited ${r.code}:\n${r.out}`);
  return r.out;
}

/** Pids of processes whose command line mentions `text` (the project folder). */
function processesMentioning(text: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    if (isAlive(Number(entry)) && commandLine(Number(entry))?.includes(text)) pids.push(Number(entry));
  }
  return pids;
}

const JOB = (id: string) => `import { App, json, string } from 'sluice';

interface Order {
  id: number;
  amount: number;
}
interface Doubled {
  id: number;
  doubled: number;
}

const app = new App({ id: '${id}' });
app
  .stream('${id}-in', { key: string(), value: json<Order>() })
  .filter((o) => o.amount > 0)
  .map((o): Doubled => ({ id: o.id, doubled: o.amount * 2 }))
  .to('${id}-out', { key: string(), value: json<Doubled>() });
export default app;
`;

/** Typed for real: a misspelt field of the record type must fail the check. */
const BAD_JOB = `import { App, json } from 'sluice';
const app = new App({ id: 'bad' });
app.stream('in', { value: json<{ amount: number }>() }).map((o) => o.amonut).to('out');
export default app;
`;

/** A unit test of a job with the test driver from the tarball, in either module system. */
const DRIVER_TEST = (kind: 'esm' | 'cjs') => {
  const load =
    kind === 'esm'
      ? "import assert from 'node:assert/strict';\nimport { test } from 'node:test';\nimport { App, json, string } from 'sluice';\nimport { TestDriver } from 'sluice/testing';\n"
      : "const assert = require('node:assert/strict');\nconst { test } = require('node:test');\nconst { App, json, string } = require('sluice');\nconst { TestDriver } = require('sluice/testing');\n";
  return `${load}
test('the driver should count per key over 2 partitions, without a broker', async () => {
  const app = new App({ id: 'pkg-driver' });
  app.stream('in', { key: string(), value: json() }).keyBy((v) => v.k).count({ name: 'n' }).to('out', { value: json() });
  const driver = new TestDriver(app, { partitions: 2 });
  await driver.input('in').pipe('a', { k: 'x' });
  await driver.input('in').pipe('b', { k: 'x' });
  assert.deepEqual(driver.output('out').readValues(), [1, 2]);
  assert.equal(driver.state('n').get('x'), 2);
  await driver.close();
});
`;
};

/** The driver's types from the tarball, used under `strict` (with the libraries' own declarations checked). */
const DRIVER_TYPES = `import { App, json, string } from 'sluice';
import { TestDriver, type OutputRecord } from 'sluice/testing';
const app = new App({ id: 'typed' });
app.stream('in', { key: string(), value: json<{ n: number }>() }).to('out');
const driver = new TestDriver(app, { partitions: 4, commit: 'manual', state: 'memory' });
await driver.input<string, { n: number }>('in').pipe('k', { n: 1 }, { timestamp: 5 });
const out: OutputRecord<string, { n: number }>[] = driver.output<string, { n: number }>('out').readAll();
await driver.crash({ wipeState: true });
await driver.restart();
await driver.close();
export { out };
`;

const TSCONFIG = (file: string) =>
  `${JSON.stringify({
    compilerOptions: {
      strict: true,
      module: 'nodenext',
      target: 'es2022',
      noEmit: true,
      types: ['node'],
      skipLibCheck: false,
    },
    files: [file],
  })}\n`;

interface Project {
  kind: 'esm' | 'cjs';
  dir: string;
  id: string;
}

/** A fresh project with the tarball, TypeScript and Node's types installed, and its job. */
async function makeProject(base: string, kind: Project['kind'], tarball: string): Promise<Project> {
  const dir = join(base, kind);
  mkdirSync(dir);
  if (kind === 'esm') {
    writeFileSync(
      join(dir, 'package.json'),
      `${JSON.stringify({ name: 'team-esm', version: '1.0.0', private: true, type: 'module' })}\n`,
    );
  } else {
    await ok('npm', ['init', '-y'], dir);
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    assert.ok(pkg.type === undefined || pkg.type === 'commonjs', `npm init -y wrote type ${pkg.type}`);
  }
  await ok(
    'npm',
    [
      'install',
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      tarball,
      `typescript@${versionOf('typescript')}`,
      `@types/node@${versionOf('@types/node')}`,
    ],
    dir,
  );
  const id = uniqueName(`t-pkg-${kind}`);
  writeFileSync(join(dir, 'job.ts'), JOB(id));
  return { kind, dir, id };
}

/** `npx sluice run job.ts` in the project; resolves with the worker's pid once its tasks run. */
function startWorker(
  p: Project,
  base: string,
): { npx: ChildProcess; log: () => string; pid: Promise<number> } {
  const npx = spawn('npx', ['sluice', 'run', 'job.ts', '--http-port', '0'], {
    cwd: p.dir,
    env: cleanEnv({
      KAFKA_BROKERS: brokers().join(','),
      SLUICE_STATE_DIR: join(base, `state-${p.kind}`),
      SLUICE_LOG_FORMAT: 'json',
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  npx.stdout!.on('data', (d) => {
    out += d;
  });
  npx.stderr!.on('data', (d) => {
    out += d;
  });
  const pid = eventually(
    () => {
      if (npx.exitCode !== null) throw new Error(`npx exited ${npx.exitCode}:\n${out}`);
      const running = out.split('\n').find((l) => l.includes('"task running"'));
      return running ? (JSON.parse(running).pid as number) : 0;
    },
    { timeoutMs: 60_000, what: `the ${p.kind} worker's tasks to run` },
  );
  return { npx, log: () => out, pid };
}

test('npm pack should ship dist/src and bin, and the tarball should install and run a TypeScript job in an ESM and a CommonJS project', {
  timeout: 180_000,
}, async (t) => {
  const started = Date.now();
  const step = (what: string) => t.diagnostic(`${((Date.now() - started) / 1000).toFixed(1)} s: ${what}`);
  const base = mkdtempSync(join(tmpdir(), 'sluice-pkg-'));
  const workers: Array<{ pid?: number }> = [];
  const ids: string[] = [];
  t.after(async () => {
    for (const w of workers) if (w.pid !== undefined && isAlive(w.pid)) process.kill(w.pid, 'SIGKILL');
    await Promise.all(ids.map((id) => deleteTopicsMatching(id)));
    rmSync(base, { recursive: true, force: true });
  });

  const packed = JSON.parse(
    await ok('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', base], ROOT),
  )[0];
  const files: string[] = packed.files.map((f: { path: string }) => f.path);
  for (const f of [
    'bin/sluice.js',
    'dist/src/index.js',
    'dist/src/index.d.ts',
    'dist/src/cli/main.js',
    'dist/src/testing/index.js',
    'dist/src/testing/index.d.ts',
  ])
    assert.ok(files.includes(f), `${f} is in the tarball`);
  const stray = files.filter(
    (f) => /^(test|bench|examples|scripts|src|dist\/(?!src\/))/.test(f) || f.endsWith('.map'),
  );
  assert.deepEqual(stray, [], 'only dist/src, bin, docs and the package files are shipped');
  const tarball = join(base, packed.filename);
  step(`packed ${files.length} files`);

  const [esm, cjs] = await Promise.all([
    makeProject(base, 'esm', tarball),
    makeProject(base, 'cjs', tarball),
  ]);
  ids.push(esm.id, cjs.id);
  step('installed into both projects');

  for (const p of [esm, cjs]) {
    writeFileSync(join(p.dir, 'tsconfig.json'), TSCONFIG('job.ts'));
    await ok('npx', ['tsc', '-p', '.'], p.dir);
    writeFileSync(join(p.dir, 'bad.ts'), BAD_JOB);
    writeFileSync(join(p.dir, 'tsconfig.bad.json'), TSCONFIG('bad.ts'));
    const bad = await run('npx', ['tsc', '-p', 'tsconfig.bad.json'], p.dir);
    assert.notEqual(bad.code, 0, `${p.kind}: a misspelt field type-checks:\n${bad.out}`);
    assert.match(bad.out, /amonut/, p.kind);
  }
  step('type-checked (strict) in both');

  // sluice/testing from the tarball: typed (ESM), and a node:test test in both module systems.
  writeFileSync(join(esm.dir, 'driver-types.ts'), DRIVER_TYPES);
  writeFileSync(join(esm.dir, 'tsconfig.driver.json'), TSCONFIG('driver-types.ts'));
  await ok('npx', ['tsc', '-p', 'tsconfig.driver.json'], esm.dir);
  writeFileSync(join(esm.dir, 'driver.test.mjs'), DRIVER_TEST('esm'));
  writeFileSync(join(cjs.dir, 'driver.test.cjs'), DRIVER_TEST('cjs'));
  await Promise.all([
    ok('node', ['--test', 'driver.test.mjs'], esm.dir),
    ok('node', ['--test', 'driver.test.cjs'], cjs.dir),
  ]);
  step('sluice/testing: typed, and a driver test passes in both');

  // The first symptom: ERR_MODULE_NOT_FOUND …/dist/src/cli/main.js.
  assert.match(await ok('npx', ['sluice', '--help'], esm.dir), /Usage:\n\s+sluice run <job-file>/);

  // In the CommonJS project: a CommonJS .js job works, an import-style .js job says what to change.
  writeFileSync(
    join(cjs.dir, 'legacy.js'),
    "const { App } = require('sluice');\nconst app = new App({ id: 'legacy' });\napp.stream('a').to('b');\nmodule.exports = app;\n",
  );
  const legacy = await ok('npx', ['sluice', 'topology', 'legacy.js'], cjs.dir);
  assert.match(legacy, /Topology of legacy/);
  writeFileSync(
    join(cjs.dir, 'imports.js'),
    "import { App } from 'sluice';\nconst app = new App({ id: 'imports' });\napp.stream('a').to('b');\nexport default app;\n",
  );
  const imports = await run('npx', ['sluice', 'topology', 'imports.js'], cjs.dir);
  assert.equal(imports.code, 1, imports.out);
  assert.match(imports.out, /add it, or name the file \.mjs/);
  const topo = await ok('npx', ['sluice', 'topology', 'job.ts'], cjs.dir);
  assert.match(topo, new RegExp(`Topology of ${cjs.id}`));
  step('topology in the CommonJS project');

  await createTopics(
    [esm, cjs].flatMap((p) => [
      { topic: `${p.id}-in`, partitions: 2 },
      { topic: `${p.id}-out`, partitions: 2 },
    ]),
  );
  const running = [esm, cjs].map((p) => ({ p, ...startWorker(p, base) }));
  for (const r of running) {
    const w: { pid?: number } = {};
    workers.push(w);
    w.pid = await r.pid.catch((e) => assert.fail(`${r.p.kind}: ${e.message}\n${r.log()}`));
  }
  step(`workers running (pids ${workers.map((w) => w.pid).join(', ')})`);

  const records = Array.from({ length: 20 }, (_, i) => ({
    key: `o${i}`,
    value: JSON.stringify({ id: i, amount: i % 4 === 0 ? 0 : i }),
  }));
  const expected = records
    .map((r) => JSON.parse(r.value))
    .filter((o) => o.amount > 0)
    .map((o) => ({ id: o.id, doubled: o.amount * 2 }));
  await Promise.all([esm, cjs].map((p) => produce(`${p.id}-in`, records)));
  for (const r of running) {
    const out = await readAll(`${r.p.id}-out`, { expected: expected.length, timeoutMs: 30_000 });
    const got = out.map((o) => JSON.parse(o.value!)).sort((a, b) => a.id - b.id);
    assert.deepEqual(got, expected, `${r.p.kind} output\n${r.log()}`);
  }
  step('outputs read');

  for (const r of running) r.npx.kill('SIGTERM');
  for (const [i, r] of running.entries()) {
    const pid = workers[i]!.pid!;
    await eventually(() => r.npx.exitCode !== null || r.npx.signalCode !== null, {
      timeoutMs: 10_000,
      what: `npx (${r.p.kind}) to exit`,
    });
    await eventually(() => !isAlive(pid), {
      timeoutMs: 40_000,
      what: `worker ${pid} (${r.p.kind}) to exit`,
    }).catch((e) => assert.fail(`${e.message}: orphaned by npx\n${r.log()}`));
    assert.match(r.log(), /launcher exited/, `${r.p.kind}: the worker saw npm go`);
    assert.match(r.log(), /"worker stopped"/, `${r.p.kind}: a graceful stop\n${r.log()}`);
    await eventually(() => processesMentioning(r.p.dir).length === 0, {
      timeoutMs: 5_000,
      what: `no process left in ${r.p.dir} (${processesMentioning(r.p.dir).join(', ')})`,
    });
  }
  step('SIGTERM through npx stopped both workers');
});
