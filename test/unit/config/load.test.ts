import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseArgs } from '../../../src/cli/args.js';
import { brokersSource, loadConfig } from '../../../src/config/load.js';
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
      const said = Object.fromEntries(e.problems.map((p) => [p.path, p.message]));
      assert.equal(said['processing.comitIntervalMs'], 'unknown key (did you mean "commitIntervalMs"?)');
      assert.equal(said['flag --http.prot'], 'unknown setting (did you mean "http.port"?)');
      assert.equal(said.extra, 'unknown key', 'nothing close to suggest');
      assert.equal(said['env SLUICE_NOPE'], 'unknown setting');
      return true;
    },
  );
});

test('config should list the problems across settings even when another setting has a value of the wrong kind', () => {
  // A misspelt enum (processing.guarantee) and a string where a boolean goes (kafka.ssl.enabled)
  // made zod skip every check across fields: the authMetrics, groupInstanceId, cert/key and
  // heartbeat problems came only one run later.
  const f = yamlFile(
    [
      'processing:\n  guarantee: exactly-once',
      'http:\n  authMetrics: true',
      'kafka:',
      '  staticMembership: false',
      '  groupInstanceId: w-1',
      '  sessionTimeoutMs: 6000',
      '  heartbeatIntervalMs: 6000',
      '  ssl:\n    enabled: "yes"\n    cert: /etc/hostname',
      '',
    ].join('\n'),
  );
  assert.throws(
    () => loadConfig({ file: f, env: {} }),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      const said = Object.fromEntries(e.problems.map((p) => [p.path, p.message]));
      assert.deepEqual(Object.keys(said).sort(), [
        'http.authMetrics',
        'kafka.groupInstanceId',
        'kafka.heartbeatIntervalMs',
        'kafka.ssl.enabled',
        'kafka.ssl.key',
        'processing.guarantee',
      ]);
      assert.equal(said['http.authMetrics'], 'needs http.authToken');
      assert.equal(said['kafka.groupInstanceId'], 'set, but kafka.staticMembership is false');
      assert.match(said['kafka.heartbeatIntervalMs']!, /must be below kafka\.sessionTimeoutMs \(6000\)/);
      assert.equal(said['kafka.ssl.key'], 'kafka.ssl.cert and kafka.ssl.key go together');
      return true;
    },
  );
});

test('config should list the problems across settings beside a fractional number, and none about a value already refused', () => {
  const paths = (env: NodeJS.ProcessEnv, file?: string) => {
    try {
      loadConfig({ env, file });
      return [];
    } catch (e) {
      assert.ok(e instanceof ConfigError);
      return e.problems.map((p) => `${p.path}${p.source ? ` (${p.source})` : ''}`).sort();
    }
  };
  // zod's .int() stops the checks across fields for good (not even a `when` runs after it).
  assert.deepEqual(paths({ SLUICE_PROCESSING_COMMIT_INTERVAL_MS: '0.5', SLUICE_HTTP_AUTH_METRICS: 'true' }), [
    'http.authMetrics (env SLUICE_HTTP_AUTH_METRICS)',
    'processing.commitIntervalMs (env SLUICE_PROCESSING_COMMIT_INTERVAL_MS)',
  ]);
  // A session below its minimum is one problem, not also one about the default heartbeat.
  assert.deepEqual(paths({ SLUICE_KAFKA_SESSION_TIMEOUT_MS: '3000' }), [
    'kafka.sessionTimeoutMs (env SLUICE_KAFKA_SESSION_TIMEOUT_MS)',
  ]);
  // An unknown mechanism is one problem, not also "username required by …".
  assert.deepEqual(
    paths({
      SLUICE_KAFKA_SASL_MECHANISM: 'gssapi',
      SLUICE_KAFKA_SASL_USERNAME: 'u',
      SLUICE_KAFKA_SASL_PASSWORD: 'p',
    }),
    ['kafka.sasl.mechanism (env SLUICE_KAFKA_SASL_MECHANISM)'],
  );
  // A misspelt section of the file names the file.
  const f = yamlFile('kafak:\n  brokers: [a:1]\n');
  assert.deepEqual(paths({}, f), [`kafak (file ${f})`]);
  // An unknown key whose name is a word of another problem's message does not hide it.
  const g = yamlFile('name: x\nschemaRegistry:\n  url: http://r:8081\n  auth:\n    username: u\n');
  assert.deepEqual(paths({}, g), [`name (file ${g})`, `schemaRegistry.auth.password (file ${g})`]);
  // A boolean refused from env is one problem, not also one about its default.
  assert.deepEqual(paths({ SLUICE_KAFKA_SSL_ENABLED: 'maybe', SLUICE_KAFKA_SSL_CA: '/etc/hostname' }), [
    'env SLUICE_KAFKA_SSL_ENABLED',
  ]);
});

test('config should refuse a heartbeat interval at or above the session timeout, and take one below it', () => {
  const problems = (env: NodeJS.ProcessEnv) => {
    try {
      loadConfig({ env });
      return [];
    } catch (e) {
      assert.ok(e instanceof ConfigError);
      return e.problems.map((p) => p.path);
    }
  };
  assert.deepEqual(
    problems({ SLUICE_KAFKA_SESSION_TIMEOUT_MS: '6000', SLUICE_KAFKA_HEARTBEAT_INTERVAL_MS: '10000' }),
    ['kafka.heartbeatIntervalMs'],
  );
  assert.deepEqual(
    problems({ SLUICE_KAFKA_SESSION_TIMEOUT_MS: '6000', SLUICE_KAFKA_HEARTBEAT_INTERVAL_MS: '2000' }),
    [],
  );
  assert.deepEqual(problems({ SLUICE_KAFKA_SESSION_TIMEOUT_MS: '9000' }), [], 'the default 3000 is below it');
});

test('config should say where a rejected value came from: env, flag, file or code', () => {
  const f = yamlFile('processing:\n  commitIntervalMs: 0\nkafka:\n  sasl:\n    username: u\n');
  assert.throws(
    () =>
      loadConfig({
        file: f,
        env: { SLUICE_HTTP_PORT: '70000', KAFKA_BROKERS: 'no-port' },
        flags: [['state.recordCacheMaxBytes', '-1']],
        overrides: { log: { level: 'loud' as 'info' } },
      }),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      const from = Object.fromEntries(e.problems.map((p) => [p.path, p.source]));
      assert.deepEqual(from, {
        'http.port': 'env SLUICE_HTTP_PORT',
        'kafka.brokers.0': 'env KAFKA_BROKERS',
        'state.recordCacheMaxBytes': 'flag --state.recordCacheMaxBytes',
        'processing.commitIntervalMs': `file ${f}`,
        'kafka.sasl.username': `file ${f}`,
        'log.level': 'code',
      });
      assert.match(e.message, /- http\.port \(env SLUICE_HTTP_PORT\): /);
      assert.match(e.message, /- kafka\.brokers\.0 \(env KAFKA_BROKERS\): expected host:port/);
      return true;
    },
  );
});

test('config should suggest the env name a misspelt SLUICE_ variable was meant to be', () => {
  assert.throws(
    () => loadConfig({ env: { SLUICE_PROCESSING_GAURANTEE: 'at_least_once' } }),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.problems[0]!.message === 'unknown setting (did you mean "SLUICE_PROCESSING_GUARANTEE"?)',
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
  assert.match(r.stderr, /bogus \(file [^)]*sluice\.yaml\): unknown key/);
  assert.match(r.stderr, /flag --http\.port/);
});

test('brokersSource should name where the brokers are set, or nothing when only defaults apply', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-cfg-'));
  const withBrokers = join(dir, 'brokers.yaml');
  writeFileSync(withBrokers, 'kafka:\n  brokers: [k1:9092]\n');
  const without = join(dir, 'other.yaml');
  writeFileSync(without, 'processing:\n  guarantee: at_least_once\n');
  assert.equal(brokersSource({ env: {} }), undefined);
  assert.equal(brokersSource({ env: {}, file: without }), undefined);
  assert.equal(brokersSource({ env: {}, file: join(dir, 'missing.yaml') }), undefined);
  assert.equal(brokersSource({ env: {}, file: withBrokers }), `file ${withBrokers}`);
  assert.equal(brokersSource({ env: { SLUICE_CONFIG: withBrokers } }), `file ${withBrokers}`);
  assert.equal(brokersSource({ env: { KAFKA_BROKERS: 'k2:9092' }, file: without }), 'env KAFKA_BROKERS');
  assert.equal(brokersSource({ env: { KAFKA_BROKERS: '' } }), undefined, 'an empty variable sets nothing');
  assert.equal(brokersSource({ env: { SLUICE_KAFKA_BROKERS: 'k3:9092' } }), 'env SLUICE_KAFKA_BROKERS');
  assert.equal(brokersSource({ env: {}, flags: [['kafka.brokers', 'k4:9092']] }), 'flag --brokers');
});

test('parseArgs should keep a command option with its value apart from config settings', () => {
  const a = parseArgs(
    ['t1', '--partitions', '3', '--compact', '--brokers', 'k:1', '--x.y=2'],
    ['compact'],
    ['partitions'],
  );
  assert.deepEqual(a.positionals, ['t1']);
  assert.deepEqual(
    [...a.switches],
    [
      ['partitions', '3'],
      ['compact', 'true'],
    ],
  );
  assert.deepEqual(a.settings, [
    ['kafka.brokers', 'k:1'],
    ['x.y', '2'],
  ]);
  assert.throws(() => parseArgs(['--partitions'], [], ['partitions']), /flag --partitions: needs a value/);
});

test('kafka.replicationFactor should be unset by default and a whole number from 1 when given', () => {
  assert.equal(loadConfig({ env: {} }).kafka.replicationFactor, undefined);
  assert.equal(loadConfig({ env: { SLUICE_KAFKA_REPLICATION_FACTOR: '3' } }).kafka.replicationFactor, 3);
  assert.equal(loadConfig({ env: {}, flags: [['kafka.replicationFactor', '2']] }).kafka.replicationFactor, 2);
  for (const bad of ['0', '1.5', 'three'])
    assert.throws(
      () => loadConfig({ env: { SLUICE_KAFKA_REPLICATION_FACTOR: bad } }),
      (e: unknown) =>
        e instanceof ConfigError && /kafka\.replicationFactor|REPLICATION_FACTOR/.test(e.message),
      bad,
    );
});
