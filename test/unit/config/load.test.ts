import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/errors.js';
import { SLUICE_BIN } from '../../helpers/workers.js';

function yamlFile(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-cfg-'));
  const f = join(dir, 'sluice.yaml');
  writeFileSync(f, text);
  return f;
}

test('config should apply defaults when nothing is given', () => {
  const c = loadConfig({ env: {} });
  assert.equal(c.processing.guarantee, 'exactly_once');
  assert.equal(c.processing.commitIntervalMs, 100);
  assert.deepEqual(c.kafka.brokers, ['127.0.0.1:9092']);
  assert.ok(Object.isFrozen(c) && Object.isFrozen(c.processing), 'config is frozen');
});

test('config should take file < env < flags in rising precedence, coercing strings', () => {
  const f = yamlFile(
    'processing:\n  commitIntervalMs: 500\n  guarantee: at_least_once\nhttp:\n  port: 1000\n',
  );
  const c = loadConfig({
    file: f,
    env: {
      SLUICE_PROCESSING_COMMIT_INTERVAL_MS: '250',
      SLUICE_HTTP_ENABLED: 'false',
      KAFKA_BROKERS: 'a:1,b:2',
    },
    flags: [['processing.commitIntervalMs', '42']],
  });
  assert.equal(c.processing.commitIntervalMs, 42);
  assert.equal(c.processing.guarantee, 'at_least_once');
  assert.equal(c.http.port, 1000);
  assert.equal(c.http.enabled, false);
  assert.deepEqual(c.kafka.brokers, ['a:1', 'b:2']);
});

test('config should list every problem of an invalid file with its path', () => {
  const f = yamlFile(
    'processing:\n  guarantee: sometimes\n  commitIntervalMs: -5\nhttp:\n  port: 70000\nkafka:\n  brokers: ["no-port"]\n',
  );
  assert.throws(
    () => loadConfig({ file: f, env: {} }),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      const paths = e.problems.map((p) => p.path).sort();
      assert.deepEqual(paths, [
        'http.port',
        'kafka.brokers.0',
        'processing.commitIntervalMs',
        'processing.guarantee',
      ]);
      for (const p of paths) assert.match(e.message, new RegExp(p.replace(/\./g, '\\.')));
      return true;
    },
  );
});

test('config should reject unknown keys in the file, env and flags together', () => {
  const f = yamlFile('processing:\n  guarantee: exactly_once\n  comitIntervalMs: 5\nextra: 1\n');
  assert.throws(
    () => loadConfig({ file: f, env: { SLUICE_NOPE: '1' }, flags: [['http.prot', '1']] }),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      const paths = e.problems.map((p) => p.path).sort();
      assert.deepEqual(paths, ['env SLUICE_NOPE', 'extra', 'flag --http.prot', 'processing.comitIntervalMs']);
      assert.ok(e.problems.every((p) => /unknown/.test(p.message)));
      return true;
    },
  );
});

test('config should name a value of the wrong type coming from env', () => {
  assert.throws(
    () => loadConfig({ env: { SLUICE_HTTP_PORT: 'eighty', SLUICE_HTTP_ENABLED: 'maybe' } }),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.problems.length === 2 &&
      e.problems.every((p) => p.path.startsWith('env ')),
  );
});

test('sluice run should fail at start with every config problem listed and exit 1', () => {
  const f = yamlFile('processing:\n  guarantee: twice\nbogus: true\n');
  const r = spawnSync(
    process.execPath,
    [SLUICE_BIN, 'run', 'whatever.js', '--config', f, '--http.port', 'x'],
    {
      encoding: 'utf8',
      env: { PATH: process.env.PATH },
    },
  );
  assert.equal(r.status, 1);
  assert.match(r.stderr, /3 problems/);
  assert.match(r.stderr, /processing\.guarantee/);
  assert.match(r.stderr, /bogus: unknown key/);
  assert.match(r.stderr, /flag --http\.port/);
});
