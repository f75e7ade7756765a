import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startLocalKafka, stopLocalKafka } from '../../src/dev/local-kafka.js';
import { makeTestCerts, type TestCerts } from '../helpers/certs.js';
import { deleteTopicsMatching, eventually, jobTopics, produce, readAll } from '../helpers/kafka.js';
import { freePort } from '../helpers/ports.js';
import { spawnWorker, type WorkerProcess } from '../helpers/workers.js';

/*
 * One broker of our own with three listeners: PLAINTEXT (topics and test I/O), SASL_PLAINTEXT
 * (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for one user) and SSL requiring a client certificate.
 * Workers talk only to the secured listeners. TEST_SECURE_KAFKA_PORT picks four ports from a
 * base (plaintext, controller, sasl, ssl); without it the OS picks free ones.
 */
const USER = 'sluice-test';
// Distinctive, so that the leak checks below cannot match anything else.
const PASSWORD = `Pw-${randomBytes(9).toString('hex')}-zq`;
const WRONG_PASSWORD = `Wrong-${randomBytes(9).toString('hex')}-zq`;
const TOKEN = `Tok-${randomBytes(12).toString('hex')}-zq`;
const TIMEOUT = { timeout: 240_000 };

let dataDir = '';
let certs: TestCerts;
let plaintext = '';
let sasl = '';
let ssl = '';
let port = 0;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'sluice-secure-kafka-'));
  certs = makeTestCerts(mkdtempSync(join(tmpdir(), 'sluice-certs-')));
  const base = Number(process.env.TEST_SECURE_KAFKA_PORT ?? 0);
  const ports = base > 0 ? [base, base + 1, base + 2, base + 3] : [];
  while (ports.length < 4) {
    const p = await freePort();
    if (!ports.includes(p)) ports.push(p);
  }
  port = ports[0]!;
  const k = await startLocalKafka({
    port,
    controllerPort: ports[1]!,
    dataDir,
    heapMb: 512,
    env: { ...process.env, KAFKA_BROKERS: '' },
    security: {
      sasl: { port: ports[2]!, users: [{ username: USER, password: PASSWORD }] },
      ssl: {
        port: ports[3]!,
        keystore: certs.brokerKeystore,
        keystorePassword: certs.keystorePassword,
        clientCa: certs.caPem,
      },
    },
  });
  plaintext = k.brokers[0]!;
  sasl = k.saslBrokers![0]!;
  ssl = k.sslBrokers![0]!;
  // The test helpers (topics, produce, read) use the PLAINTEXT listener of this broker.
  process.env.KAFKA_BROKERS = plaintext;
});

after(async () => {
  if (port) await stopLocalKafka({ port, dataDir, wipe: true }).catch(() => undefined);
  rmSync(dataDir, { recursive: true, force: true });
  if (certs) rmSync(certs.dir, { recursive: true, force: true });
});

function records(n: number) {
  return Array.from({ length: n }, (_, i) => ({
    key: `k${i % 7}`,
    value: JSON.stringify({ k: `k${i % 7}`, seq: i }),
  }));
}

/** Runs the stateless job through `env` against a secured listener; asserts every record came out once. */
async function pipelineThrough(
  prefix: string,
  env: Record<string, string>,
  extra?: (w: WorkerProcess) => Promise<void>,
) {
  const job = await jobTopics(prefix, 2);
  const N = 200;
  await produce(job.input, records(N));
  const w = spawnWorker('stateless', { name: prefix, env: { ...job.env, ...env } });
  try {
    const out = await readAll(job.output, { expected: N, timeoutMs: 90_000 });
    assert.equal(out.length, N, `${prefix}: every record once`);
    assert.deepEqual(
      out.map((r) => JSON.parse(r.value!).seq).sort((a, b) => a - b),
      Array.from({ length: N }, (_, i) => i),
    );
    await extra?.(w);
  } finally {
    assert.equal(await w.kill('SIGTERM'), 0, `${prefix}: clean exit\n${w.logs.slice(-20).join('\n')}`);
    await deleteTopicsMatching(job.id);
  }
  return w;
}

const saslEnv = (mechanism: string, password = PASSWORD) => ({
  SLUICE_KAFKA_BROKERS: sasl,
  SLUICE_KAFKA_SASL_MECHANISM: mechanism,
  SLUICE_KAFKA_SASL_USERNAME: USER,
  SLUICE_KAFKA_SASL_PASSWORD: password,
});

test('a worker should run a pipeline end to end over SASL/PLAIN', TIMEOUT, async () => {
  await pipelineThrough('t-sec-plain', saslEnv('PLAIN'));
});

test('a worker should run a pipeline end to end over SASL/SCRAM-SHA-512', TIMEOUT, async () => {
  await pipelineThrough('t-sec-scram512', saslEnv('SCRAM-SHA-512'));
});

test('a worker should run a pipeline end to end over SASL/SCRAM-SHA-256', TIMEOUT, async () => {
  await pipelineThrough('t-sec-scram256', saslEnv('scram-sha-256'));
});

test('a worker should run a pipeline end to end over TLS with a client certificate', TIMEOUT, async () => {
  await pipelineThrough('t-sec-tls', {
    SLUICE_KAFKA_BROKERS: ssl,
    SLUICE_KAFKA_SSL_ENABLED: 'true',
    SLUICE_KAFKA_SSL_CA: certs.caPem,
    SLUICE_KAFKA_SSL_CERT: certs.clientCert,
    SLUICE_KAFKA_SSL_KEY: certs.clientKey,
  });
});

/** Starts a worker that must fail at start; returns its output once it exited. */
async function failingWorker(name: string, env: Record<string, string>): Promise<WorkerProcess> {
  const job = await jobTopics(name, 1);
  const w = spawnWorker('stateless', { name, env: { ...job.env, ...env } });
  const code = await Promise.race([w.exited, new Promise((r) => setTimeout(() => r('hung'), 60_000))]);
  await w.kill('SIGKILL');
  await deleteTopicsMatching(job.id);
  assert.equal(code, 1, `${name} should exit 1 at start, got ${code}:\n${w.logs.slice(-20).join('\n')}`);
  return w;
}

test(
  'a worker with a wrong SASL password should fail at start with SLUICE_KAFKA_AUTH, not retry',
  TIMEOUT,
  async () => {
    const w = await failingWorker('t-sec-wrongpw', saslEnv('SCRAM-SHA-512', WRONG_PASSWORD));
    const text = w.logs.join('\n');
    assert.match(text, /SLUICE_KAFKA_AUTH|Kafka refused the SASL SCRAM-SHA-512 login as user "sluice-test"/);
    assert.doesNotMatch(text, /cannot connect to Kafka yet; retrying/, 'an auth failure is not retried');
    assert.ok(!text.includes(WRONG_PASSWORD), 'the wrong password is a secret too');
  },
);

test(
  'a worker that does not trust the broker certificate should fail at start with SLUICE_KAFKA_AUTH',
  TIMEOUT,
  async () => {
    const w = await failingWorker('t-sec-badca', {
      SLUICE_KAFKA_BROKERS: ssl,
      SLUICE_KAFKA_SSL_ENABLED: 'true',
      SLUICE_KAFKA_SSL_CA: certs.otherCaPem,
      SLUICE_KAFKA_SSL_CERT: certs.clientCert,
      SLUICE_KAFKA_SSL_KEY: certs.clientKey,
    });
    assert.match(w.logs.join('\n'), /TLS to Kafka failed \(SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY/);
  },
);

test(
  'no secret should reach any output line of a worker, at trace level, in success and in failure',
  TIMEOUT,
  async () => {
    const env = { ...saslEnv('SCRAM-SHA-256'), SLUICE_HTTP_AUTH_TOKEN: TOKEN, SLUICE_LOG_LEVEL: 'trace' };
    const ok = await pipelineThrough('t-sec-leak', env, async (w) => {
      const url = await w.url();
      const open = await fetch(`${url}/status`);
      assert.equal(open.status, 401);
      assert.match(open.headers.get('www-authenticate') ?? '', /^Bearer/);
      const wrong = await fetch(`${url}/status`, { headers: { authorization: `Bearer ${TOKEN}x` } });
      assert.equal(wrong.status, 401);
      const right = await fetch(`${url}/status`, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(right.status, 200);
      assert.equal(((await right.json()) as { state: string }).state, 'running');
      assert.equal(
        (await fetch(`${url}/metrics`)).status,
        200,
        '/metrics stays open without http.authMetrics',
      );
    });
    const failed = await failingWorker('t-sec-leak-fail', {
      ...saslEnv('PLAIN', WRONG_PASSWORD),
      SLUICE_HTTP_AUTH_TOKEN: TOKEN,
      SLUICE_LOG_LEVEL: 'trace',
    });
    const lines = [...ok.logs, ...failed.logs];
    assert.ok(lines.length > 50, `trace logs expected, got ${lines.length} lines`);
    for (const secret of [PASSWORD, WRONG_PASSWORD, TOKEN]) {
      const hits = lines.filter((l) => l.includes(secret));
      assert.deepEqual(hits, [], `a secret reached the output:\n${hits.slice(0, 3).join('\n')}`);
    }
    await eventually(() => true);
  },
);
