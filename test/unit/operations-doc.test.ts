import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { configLeaves, envNameOf } from '../../src/config/schema.js';
import { METRIC } from '../../src/ops/metrics.js';

// Compiled to dist/test/unit/, so the repository root is three folders up.
const DOC = new URL('../../../docs/OPERATIONS.md', import.meta.url);

/** The first cell of every table row, without backticks. */
function firstCells(text: string): string[] {
  return [...text.matchAll(/^\|\s*`([^`|]+)`\s*\|/gm)].map((m) => m[1]!.trim());
}

test('docs/OPERATIONS.md should list every metric of METRIC', () => {
  const rows = new Set(firstCells(readFileSync(DOC, 'utf8')));
  const missing = Object.values(METRIC)
    .map((m) => m.name)
    .filter((name) => !rows.has(name));
  assert.deepEqual(
    missing,
    [],
    `metrics missing from the table in docs/OPERATIONS.md: ${missing.join(', ')}`,
  );
});

test('docs/OPERATIONS.md should list no metric that METRIC lacks', () => {
  const names = new Set<string>(Object.values(METRIC).map((m) => m.name));
  const unknown = firstCells(readFileSync(DOC, 'utf8')).filter(
    (c) => c.startsWith('sluice_') && !c.startsWith('sluice_node_') && !names.has(c),
  );
  assert.deepEqual(unknown, [], `unknown metrics in docs/OPERATIONS.md: ${unknown.join(', ')}`);
});

test('docs/OPERATIONS.md should list every config key with its env name', () => {
  const text = readFileSync(DOC, 'utf8');
  const rows = new Set(firstCells(text));
  const missing: string[] = [];
  for (const leaf of configLeaves) {
    const dotted = leaf.path.join('.');
    if (!rows.has(dotted)) missing.push(dotted);
    else if (!text.includes(`\`${envNameOf(leaf.path)}\``))
      missing.push(`${dotted} (env ${envNameOf(leaf.path)})`);
  }
  assert.deepEqual(missing, [], `config keys missing from docs/OPERATIONS.md: ${missing.join(', ')}`);
});

test('docs/OPERATIONS.md should list no config key that the schema lacks', () => {
  const keys = new Set(configLeaves.map((l) => l.path.join('.')));
  const sections = new Set(configLeaves.map((l) => l.path[0]!));
  const unknown = firstCells(readFileSync(DOC, 'utf8')).filter(
    (c) => /^[a-z]+\.[A-Za-z.]+$/.test(c) && sections.has(c.split('.')[0]!) && !keys.has(c),
  );
  assert.deepEqual(unknown, [], `unknown config keys in docs/OPERATIONS.md: ${unknown.join(', ')}`);
});
