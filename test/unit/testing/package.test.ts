import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

// The example test (examples/driver.test.ts) runs with the unit tests, through the package's own
// `sluice/testing` entry, as a user's test would import it.
import '../../../examples/driver.test.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

test('the package should export the test driver as sluice/testing', async () => {
  const m = await import('sluice/testing');
  for (const name of ['TestDriver', 'SimulatedKafka', 'TestInput', 'TestOutput'])
    assert.equal(typeof (m as Record<string, unknown>)[name], 'function', name);
});

test('a CommonJS project should load sluice/testing with require (require(esm), Node ≥ 20.19)', () => {
  const code = [
    "const { TestDriver } = require('sluice/testing');",
    "const { App, json, string } = require('sluice');",
    "const app = new App({ id: 'cjs' });",
    "app.stream('in', { key: string(), value: json() }).map((v) => v + 1).to('out', { value: json() });",
    'const d = new TestDriver(app);',
    "d.input('in').pipe('k', 1).then(() => { console.log(JSON.stringify(d.output('out').readValues())); return d.close(); });",
  ].join('\n');
  const r = spawnSync(process.execPath, ['--input-type=commonjs', '-e', code], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), '[2]');
});
