import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { slf4jBindings } from '../../src/dev/kafka-jars.js';
import {
  localKafkaStatus,
  resolveKafka,
  startLocalKafka,
  stopLocalKafka,
} from '../../src/dev/local-kafka.js';
import { brokerAnswers, probeBroker } from '../../src/kafka/probe.js';

/*
 * These tests start their own brokers on ports of their own, beside the suite's shared broker (which
 * the runner hands us in KAFKA_BROKERS, and which startLocalKafka would otherwise just return).
 * Jars come from the shared cache (~/.cache/sluice), so only a first run on a machine downloads them.
 */
const PORT_DEFAULT = 29092;
const PORT_39 = 29192;
const PORT_DOOMED = 29292;
const TIMEOUT = { timeout: 180_000 };

/** Hides KAFKA_BROKERS for the duration of the test, and makes a data dir that is wiped after it. */
async function ownBroker(t: TestContext, port: number): Promise<string> {
  const saved = process.env.KAFKA_BROKERS;
  delete process.env.KAFKA_BROKERS;
  const dataDir = await mkdtemp(join(tmpdir(), `sluice-local-kafka-${port}-`));
  t.after(async () => {
    await stopLocalKafka({ port, dataDir, wipe: true });
    await rm(dataDir, { recursive: true, force: true });
    if (saved !== undefined) process.env.KAFKA_BROKERS = saved;
  });
  return dataDir;
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test(
  'local kafka should start, reuse, report and stop a broker of the default version',
  TIMEOUT,
  async (t) => {
    const dataDir = await ownBroker(t, PORT_DEFAULT);
    const started = Date.now();
    const kafka = await startLocalKafka({ port: PORT_DEFAULT, dataDir });
    t.diagnostic(`Kafka ${kafka.version} ready in ${Date.now() - started} ms`);

    await t.test(
      'local kafka should start a broker that creates topics, serves groups and commits transactions',
      async () => {
        assert.equal(kafka.alreadyRunning, false);
        assert.deepEqual(kafka.brokers, [`127.0.0.1:${PORT_DEFAULT}`]);
        assert.ok(kafka.pid > 0);
        assert.ok(processExists(kafka.pid));
        assert.equal(kafka.logFile, join(dataDir, 'logs', 'server.log'));
        await probeBroker(kafka.brokers, { timeoutMs: 30_000 });
      },
    );

    await t.test('local kafka should treat a second start on the same port as a no-op', async () => {
      const again = await startLocalKafka({ port: PORT_DEFAULT, dataDir });
      assert.equal(again.alreadyRunning, true);
      assert.equal(again.pid, kafka.pid);
      assert.equal(again.version, kafka.version);
      assert.deepEqual(again.brokers, kafka.brokers);
    });

    await t.test('local kafka should say the broker runs, with its pid', async () => {
      const status = await localKafkaStatus({ port: PORT_DEFAULT, dataDir });
      assert.equal(status.running, true);
      assert.equal(status.pid, kafka.pid);
      assert.equal(status.version, kafka.version);
      assert.deepEqual(status.brokers, kafka.brokers);
    });

    await t.test('local kafka should stop the broker and its process', async () => {
      const stopping = Date.now();
      assert.equal(await stopLocalKafka({ port: PORT_DEFAULT, dataDir }), true);
      t.diagnostic(`stopped in ${Date.now() - stopping} ms`);
      assert.equal(processExists(kafka.pid), false);
      assert.equal((await localKafkaStatus({ port: PORT_DEFAULT, dataDir })).running, false);
      assert.equal(await brokerAnswers(kafka.brokers, 1_000), false);
      assert.equal(
        await stopLocalKafka({ port: PORT_DEFAULT, dataDir }),
        false,
        'a second stop finds nothing',
      );
    });
  },
);

test('local kafka should start, answer and stop Kafka 3.9 too', TIMEOUT, async (t) => {
  const dataDir = await ownBroker(t, PORT_39);
  const started = Date.now();
  const log = (msg: string) => t.diagnostic(`+${Date.now() - started} ms ${msg}`);
  const kafka = await startLocalKafka({ version: '3.9', port: PORT_39, dataDir, log });
  t.diagnostic(`Kafka ${kafka.version} ready in ${Date.now() - started} ms`);
  assert.match(kafka.version, /^3\.9\.\d+$/);
  assert.equal(kafka.alreadyRunning, false);
  await probeBroker(kafka.brokers, { timeoutMs: 30_000 });
  assert.equal((await localKafkaStatus({ port: PORT_39, dataDir })).running, true);
  assert.equal(await stopLocalKafka({ port: PORT_39, dataDir }), true);
  assert.equal(processExists(kafka.pid), false);
});

test('local kafka should report the log tail when the broker dies during start-up', TIMEOUT, async (t) => {
  const dataDir = await ownBroker(t, PORT_DOOMED);
  // A 1 MB heap is too small for any JVM: it exits at once, after writing why to the log.
  await assert.rejects(startLocalKafka({ port: PORT_DOOMED, dataDir, heapMb: 1 }), (err: Error) => {
    assert.match(err.message, /exited during start-up/);
    assert.ok(err.message.includes(join(dataDir, 'logs', 'server.log')), err.message);
    assert.match(err.message, /heap/i);
    return true;
  });
  assert.equal((await localKafkaStatus({ port: PORT_DOOMED, dataDir })).running, false);
});

test(
  'local kafka should fetch jars with Maven once into a fresh cache and reuse them after',
  TIMEOUT,
  async (t) => {
    const cacheDir = await mkdtemp(join(tmpdir(), 'sluice-kafka-cache-'));
    t.after(() => rm(cacheDir, { recursive: true, force: true }));
    const started = Date.now();
    const { version, libsDir } = await resolveKafka({ version: '3.9', cacheDir, env: {} });
    t.diagnostic(`Kafka ${version} jars resolved in ${Date.now() - started} ms`);
    const jars = await readdir(libsDir);
    assert.ok(jars.includes(`kafka_2.13-${version}.jar`));
    assert.ok(jars.some((j) => j.startsWith(`kafka-tools-${version}`)));
    assert.deepEqual(slf4jBindings(jars), ['slf4j-reload4j-1.7.36.jar']);
    assert.ok(existsSync(join(cacheDir, `kafka-${version}`, '.complete')));
    assert.deepEqual(
      (await readdir(join(cacheDir, `kafka-${version}`))).filter((f) => f.startsWith('libs.partial')),
      [],
    );
    const noTools = async (): Promise<string | undefined> => assert.fail('a cached version needs no tools');
    assert.deepEqual(await resolveKafka({ version: '3.9', cacheDir, env: {}, toolProbe: noTools }), {
      version,
      libsDir,
    });
  },
);
