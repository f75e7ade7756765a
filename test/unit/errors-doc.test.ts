import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { ERROR_CODES } from '../../src/errors.js';

// Compiled to dist/test/unit/, so the repository root is three folders up.
const DOC = new URL('../../../docs/errors.md', import.meta.url);

/** The codes the doc lists: one `## \`CODE\`` heading each. */
function documentedCodes(text: string): string[] {
  return [...text.matchAll(/^##\s+`?([A-Z][A-Z0-9_]*)`?\s*$/gm)].map((m) => m[1]!);
}

/** The body of each code's section, up to the next heading of the same level. */
function sections(text: string): Map<string, string> {
  const out = new Map<string, string>();
  const parts = text.split(/^(?=##\s)/m);
  for (const part of parts) {
    const m = /^##\s+`?([A-Z][A-Z0-9_]*)`?\s*$/m.exec(part);
    if (m) out.set(m[1]!, part.slice(m[0].length));
  }
  return out;
}

test('docs/errors.md should list every error code of ERROR_CODES', () => {
  const documented = new Set(documentedCodes(readFileSync(DOC, 'utf8')));
  const missing = ERROR_CODES.filter((c) => !documented.has(c));
  assert.deepEqual(missing, [], `codes missing from docs/errors.md: ${missing.join(', ')}`);
});

test('docs/errors.md should list no code that ERROR_CODES lacks, and each once', () => {
  const listed = documentedCodes(readFileSync(DOC, 'utf8'));
  const known = new Set<string>(ERROR_CODES);
  const unknown = listed.filter((c) => !known.has(c));
  assert.deepEqual(unknown, [], `unknown codes in docs/errors.md: ${unknown.join(', ')}`);
  const twice = listed.filter((c, i) => listed.indexOf(c) !== i);
  assert.deepEqual(twice, [], `codes listed twice in docs/errors.md: ${twice.join(', ')}`);
});

test('docs/errors.md should say for each code what it means, who raises it and what to do', () => {
  const bodies = sections(readFileSync(DOC, 'utf8'));
  const incomplete: string[] = [];
  for (const code of ERROR_CODES) {
    const body = bodies.get(code) ?? '';
    for (const field of ['**Meaning:**', '**Raised by:**', '**What to do:**']) {
      if (!body.includes(field)) incomplete.push(`${code} lacks ${field}`);
    }
  }
  assert.deepEqual(incomplete, []);
});
