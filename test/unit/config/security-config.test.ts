import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/errors.js';
import { securityOptions } from '../../../src/kafka/security.js';

function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ConfigError, String(e));
    return e.problems.map((p) => `${p.path}: ${p.message}`);
  }
  assert.fail('expected a ConfigError');
}

const dir = mkdtempSync(join(tmpdir(), 'sluice-sec-config-'));
const pem = (name: string) => {
  const p = join(dir, name);
  writeFileSync(p, `-----BEGIN ${name}-----\n-----END ${name}-----\n`);
  return p;
};

test('config should take SASL and TLS settings from env, mechanism in any case', () => {
  const ca = pem('ca.pem');
  const c = loadConfig({
    env: {
      SLUICE_KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
      SLUICE_KAFKA_SASL_USERNAME: 'svc',
      SLUICE_KAFKA_SASL_PASSWORD: 'pw',
      SLUICE_KAFKA_SSL_ENABLED: 'true',
      SLUICE_KAFKA_SSL_CA: ca,
      SLUICE_KAFKA_SSL_REJECT_UNAUTHORIZED: 'false',
      SLUICE_HTTP_AUTH_TOKEN: 'x'.repeat(16),
      SLUICE_HTTP_AUTH_METRICS: 'yes',
    },
  });
  assert.deepEqual(c.kafka.sasl, { mechanism: 'scram-sha-512', username: 'svc', password: 'pw' });
  assert.deepEqual(c.kafka.ssl, { enabled: true, ca, rejectUnauthorized: false });
  assert.equal(c.http.authToken, 'x'.repeat(16));
  assert.equal(c.http.authMetrics, true);
  const k = securityOptions({ ...c.kafka });
  assert.deepEqual(k.sasl, { mechanism: 'scram-sha-512', username: 'svc', password: 'pw' });
  assert.equal(typeof k.ssl, 'object');
  assert.equal((k.ssl as { rejectUnauthorized: boolean }).rejectUnauthorized, false);
  assert.ok(Buffer.isBuffer((k.ssl as { ca: Buffer[] }).ca[0]), 'the CA file is read');
});

test('config should default to no SASL, no TLS and an open HTTP server', () => {
  const c = loadConfig({ env: {} });
  assert.deepEqual(c.kafka.sasl, {});
  assert.deepEqual(c.kafka.ssl, { enabled: false, rejectUnauthorized: true });
  assert.equal(c.http.authToken, undefined);
  assert.deepEqual(securityOptions({ ...c.kafka }), {});
});

test('config should reject unknown keys in the kafka.ssl, kafka.sasl and http sections', () => {
  const problems = problemsOf(() =>
    loadConfig({
      env: {},
      overrides: {
        kafka: {
          ssl: { enabled: true, keystore: 'x' },
          sasl: { mechanism: 'plain', username: 'u', password: 'p', jaas: 'x' },
        },
        http: { token: 'x' },
      } as never,
    }),
  );
  assert.deepEqual(problems.sort(), [
    'http.token: unknown key',
    'kafka.sasl.jaas: unknown key',
    'kafka.ssl.keystore: unknown key',
  ]);
  assert.deepEqual(
    problemsOf(() => loadConfig({ env: { SLUICE_KAFKA_SASL_PASSWD: 'x', SLUICE_HTTP_TOKEN: 'y' } })).sort(),
    [
      'env SLUICE_HTTP_TOKEN: unknown setting',
      'env SLUICE_KAFKA_SASL_PASSWD: unknown setting (did you mean "SLUICE_KAFKA_SASL_PASSWORD"?)',
    ],
  );
});

test('config should list every inconsistent security setting with its path', () => {
  const problems = problemsOf(() =>
    loadConfig({
      env: {
        SLUICE_KAFKA_SASL_MECHANISM: 'gssapi',
        SLUICE_KAFKA_SSL_CA: join(dir, 'missing.pem'),
        SLUICE_KAFKA_SSL_CERT: pem('cert.pem'),
        SLUICE_HTTP_AUTH_TOKEN: 'short',
        SLUICE_HTTP_AUTH_METRICS: 'true',
      },
    }),
  );
  const paths = problems.map((p) => p.slice(0, p.indexOf(':')));
  for (const p of [
    'kafka.sasl.mechanism',
    'kafka.ssl.ca',
    'kafka.ssl.cert',
    'kafka.ssl.key',
    'http.authToken',
  ])
    assert.ok(paths.includes(p), `${p} missing from:\n${problems.join('\n')}`);
  assert.ok(problems.includes('kafka.ssl.ca: cannot read this file'));
  assert.ok(problems.includes('kafka.ssl.cert: set, but kafka.ssl.enabled is false'));
  assert.deepEqual(
    problemsOf(() =>
      loadConfig({ env: { SLUICE_KAFKA_SASL_MECHANISM: 'plain', SLUICE_KAFKA_SASL_USERNAME: 'u' } }),
    ),
    ['kafka.sasl.password: required by kafka.sasl.mechanism plain'],
  );
  assert.deepEqual(
    problemsOf(() => loadConfig({ env: { SLUICE_KAFKA_SASL_PASSWORD: 'p' } })),
    ['kafka.sasl.password: set, but kafka.sasl.mechanism is not'],
  );
});

test('config problems should never echo a secret value', () => {
  const secret = 'Zz-secret-value-never-shown';
  try {
    loadConfig({ env: { SLUICE_KAFKA_SASL_PASSWORD: secret, SLUICE_HTTP_AUTH_TOKEN: 'Zz-short' } });
    assert.fail('expected a ConfigError');
  } catch (e) {
    assert.ok(!(e as Error).message.includes(secret));
    assert.ok(!(e as Error).message.includes('Zz-short'));
  }
});
