import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

// Compiled to dist/test/unit/, so the repository root is three folders up. The test reads the
// TypeScript sources, not their build, so that `import type` counts too.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const SRC = join(ROOT, 'src');

interface SourceFile {
  /** Path relative to src/, with `/` separators: `kafka/client.ts`. */
  rel: string;
  abs: string;
  text: string;
}

function walk(dir: string, out: SourceFile[] = []): SourceFile[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const abs = join(dir, entry.name);
    if (entry.isDirectory()) walk(abs, out);
    else if (/\.(ts|mts|cts|js|mjs|cjs)$/.test(entry.name)) {
      out.push({ rel: relative(SRC, abs).split(sep).join('/'), abs, text: readFileSync(abs, 'utf8') });
    }
  }
  return out;
}

/**
 * Drops block comments and whole-line `//` comments, so that prose about an import is not taken
 * for one. (Trailing `//` comments are kept: stripping them could cut URLs inside strings.)
 */
function stripComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/^\s*\/\/.*$/gm, '');
}

export interface ImportRef {
  specifier: string;
  /** `import`, `export` (re-export), `dynamic` (`import()`) or `require`. */
  kind: 'import' | 'export' | 'dynamic' | 'require';
}

/** Every module a file refers to: static imports, re-exports, `import()` and `require()`. */
export function importsOf(text: string): ImportRef[] {
  const code = stripComments(text);
  const out: ImportRef[] = [];
  for (const m of code.matchAll(/^\s*(import|export)\b([^;'"]*?)\bfrom\s*['"]([^'"]+)['"]/gm)) {
    out.push({ specifier: m[3]!, kind: m[1] as 'import' | 'export' });
  }
  for (const m of code.matchAll(/^\s*import\s*['"]([^'"]+)['"]/gm))
    out.push({ specifier: m[1]!, kind: 'import' });
  for (const m of code.matchAll(/\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g)) {
    out.push({ specifier: m[1]!, kind: 'dynamic' });
  }
  for (const m of code.matchAll(/\brequire(?:\.resolve)?\s*\(\s*['"]([^'"]+)['"]\s*\)/g)) {
    out.push({ specifier: m[1]!, kind: 'require' });
  }
  return out;
}

const isPackage = (specifier: string, pkg: string) => specifier === pkg || specifier.startsWith(`${pkg}/`);

/** Where a relative specifier points, relative to src/ (`runtime/task.js`); undefined for packages. */
function target(file: SourceFile, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  return relative(SRC, resolve(dirname(file.abs), specifier))
    .split(sep)
    .join('/');
}

const files = walk(SRC);

function violations(rule: (file: SourceFile, ref: ImportRef) => boolean): string[] {
  const out: string[] = [];
  for (const f of files) {
    for (const ref of importsOf(f.text)) if (rule(f, ref)) out.push(`src/${f.rel} → ${ref.specifier}`);
  }
  return out;
}

test('the import scanner should find static, type, multi-line, dynamic and require imports', () => {
  const sample = [
    "import { a } from 'kafkajs';",
    "import type { B } from 'kafkajs/types';",
    'import {',
    '  c,',
    "  d } from '../runtime/task.js';",
    "export { e } from './runtime/worker.js';",
    "export * from './runtime/start.js';",
    "import 'side-effect';",
    "const f = await import('@nxtedition/rocksdb');",
    "const g = require('kafkajs/src/consumer/batch');",
    "// import { h } from 'commented-out';",
    "/* import { i } from 'also-commented'; */",
  ].join('\n');
  assert.deepEqual(
    importsOf(sample).map((r) => `${r.kind} ${r.specifier}`),
    [
      'import kafkajs',
      'import kafkajs/types',
      'import ../runtime/task.js',
      'export ./runtime/worker.js',
      'export ./runtime/start.js',
      'import side-effect',
      'dynamic @nxtedition/rocksdb',
      'require kafkajs/src/consumer/batch',
    ],
  );
});

test('the boundary walk should see the real imports of src (so the rules below are not vacuous)', () => {
  assert.ok(
    files.some((f) => f.rel === 'index.ts'),
    'src/index.ts is found',
  );
  const kafkaImporters = files.filter((f) =>
    importsOf(f.text).some((r) => isPackage(r.specifier, 'kafkajs')),
  );
  assert.ok(kafkaImporters.length > 0, 'some file imports kafkajs');
  const rocksImporters = files.filter((f) =>
    importsOf(f.text).some((r) => isPackage(r.specifier, '@nxtedition/rocksdb')),
  );
  assert.ok(rocksImporters.length > 0, 'some file imports @nxtedition/rocksdb');
});

test('kafkajs should be imported only under src/kafka/', () => {
  const bad = violations((f, r) => isPackage(r.specifier, 'kafkajs') && !f.rel.startsWith('kafka/'));
  assert.deepEqual(bad, [], 'kafkajs imported outside src/kafka/');
});

test('@nxtedition/rocksdb should be imported only under src/state/', () => {
  const bad = violations(
    (f, r) => isPackage(r.specifier, '@nxtedition/rocksdb') && !f.rel.startsWith('state/'),
  );
  assert.deepEqual(bad, [], '@nxtedition/rocksdb imported outside src/state/');
});

test('src/index.ts should take nothing from runtime/ but start.js', () => {
  const index = files.find((f) => f.rel === 'index.ts')!;
  const bad = importsOf(index.text)
    .filter(
      (r) =>
        target(index, r.specifier)?.startsWith('runtime/') &&
        target(index, r.specifier) !== 'runtime/start.js',
    )
    .map((r) => `${r.kind} ${r.specifier}`);
  assert.deepEqual(bad, [], 'src/index.ts re-exports runtime internals');
});

test('src/api/ should not import from src/runtime/', () => {
  const bad = violations(
    (f, r) => f.rel.startsWith('api/') && (target(f, r.specifier)?.startsWith('runtime/') ?? false),
  );
  assert.deepEqual(bad, [], 'the public API depends on runtime internals');
});

/** The file a relative import of `file` resolves to (`runtime/task.js` → `runtime/task.ts`), if under src/. */
function resolved(file: SourceFile, specifier: string): string | undefined {
  const t = target(file, specifier);
  if (t === undefined) return undefined;
  const candidates = [t, t.replace(/\.js$/, '.ts'), t.replace(/\.mjs$/, '.mts'), t.replace(/\.cjs$/, '.cts')];
  return candidates.find((c) => byRel.has(c));
}

const byRel = new Map(files.map((f) => [f.rel, f]));

/** The cycles a depth-first walk of `graph` meets (one per edge back into the walk's path), as `a → b → a`. */
export function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const out: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (n: string): void => {
    state.set(n, 'open');
    stack.push(n);
    for (const m of graph.get(n) ?? []) {
      if (state.get(m) === 'open') out.push([...stack.slice(stack.indexOf(m)), m].join(' → '));
      else if (!state.has(m)) visit(m);
    }
    stack.pop();
    state.set(n, 'done');
  };
  for (const n of [...graph.keys()].sort()) if (!state.has(n)) visit(n);
  return out;
}

test('the cycle finder should find a cycle through three files and none in a chain', () => {
  assert.deepEqual(
    cyclesOf(
      new Map([
        ['a', ['b']],
        ['b', ['c']],
        ['c', ['a']],
      ]),
    ),
    ['a → b → c → a'],
  );
  assert.deepEqual(
    cyclesOf(
      new Map([
        ['a', ['b']],
        ['b', ['c']],
        ['c', []],
      ]),
    ),
    [],
  );
});

test('src/ should have no import cycle (type imports count too)', () => {
  const graph = new Map<string, string[]>();
  for (const f of files) {
    const to = importsOf(f.text)
      .map((r) => resolved(f, r.specifier))
      .filter((t): t is string => t !== undefined);
    graph.set(f.rel, [...new Set(to)]);
  }
  assert.ok(
    [...graph.values()].some((l) => l.length > 0),
    'some file under src/ imports another',
  );
  assert.deepEqual(cyclesOf(graph), [], 'import cycles under src/');
});

/** Each file of the runtime does one job (task.ts once held nine in 591 lines): this many lines at most. */
const RUNTIME_MAX_LINES = 400;

test(`no file in src/runtime/ should exceed ${RUNTIME_MAX_LINES} lines`, () => {
  const runtime = files.filter((f) => f.rel.startsWith('runtime/'));
  assert.ok(runtime.length > 0, 'src/runtime/ has files');
  const long = runtime
    .map((f) => ({
      file: `src/${f.rel}`,
      lines: f.text.split('\n').length - (f.text.endsWith('\n') ? 1 : 0),
    }))
    .filter((f) => f.lines > RUNTIME_MAX_LINES)
    .map((f) => `${f.file}: ${f.lines} lines`);
  assert.deepEqual(long, [], `files in src/runtime/ over ${RUNTIME_MAX_LINES} lines`);
});

test('the package should export the local Kafka launcher as sluice/local-kafka', async () => {
  const m = await import('sluice/local-kafka');
  for (const name of ['startLocalKafka', 'stopLocalKafka', 'localKafkaStatus'])
    assert.equal(typeof (m as Record<string, unknown>)[name], 'function', name);
});
