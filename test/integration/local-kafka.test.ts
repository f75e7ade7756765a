import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
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
import { freeBrokerPort } from '../helpers/ports.js';
import { SLUICE_BIN } from '../helpers/workers.js';

/*
 * These tests start their own brokers on ports the OS picks, beside the suite's shared broker (which
 * the runner hands us in KAFKA_BROKERS, and which startLocalKafka would otherwise just return).
 * Jars come from the shared cache (~/.cache/sluice), so only a first run on a machine downloads them.
 */
const TIMEOUT = { timeout: 180_000 };

/**
 * A free client port (with the controller's, the next one, free too) and a data dir that is wiped
 * after the test; hides KAFKA_BROKERS for the duration of the test.
 */
async function ownBroker(t: TestContext): Promise<{ port: number; dataDir: string }> {
  const saved = process.env.KAFKA_BROKERS;
  delete process.env.KAFKA_BROKERS;
  const port = await freeBrokerPort();
  const dataDir = await mkdtemp(join(tmpdir(), `sluice-local-kafka-${port}-`));
  t.after(async () => {
    await stopLocalKafka({ port, dataDir, wipe: true });
    await rm(dataDir, { recursive: true, force: true });
    if (saved !== undefined) process.env.KAFKA_BROKERS = saved;
  });
  return { port, dataDir };
}

/** Runs `sluice kafka <args>` as a user would, without KAFKA_BROKERS. */
function sluiceKafka(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env = { ...process.env };
  delete env.KAFKA_BROKERS;
  const child = spawn(process.execPath, [SLUICE_BIN, 'kafka', ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  return new Promise((done) => child.once('close', (code) => done({ code, stdout, stderr })));
}

/** Pids of the Kafka JVMs whose command line names `dataDir`'s server.properties (Linux /proc). */
function brokerPidsOf(dataDir: string): number[] {
  const props = join(dataDir, 'server.properties');
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
        return cmd.includes('kafka.Kafka') && cmd.includes(props);
      } catch {
        return false;
      }
    })
    .map(Number);
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
    const { port, dataDir } = await ownBroker(t);
    const started = Date.now();
    const kafka = await startLocalKafka({ port, dataDir });
    t.diagnostic(`Kafka ${kafka.version} ready in ${Date.now() - started} ms`);

    await t.test(
      'local kafka should start a broker that creates topics, serves groups and commits transactions',
      async () => {
        assert.equal(kafka.alreadyRunning, false);
        assert.deepEqual(kafka.brokers, [`127.0.0.1:${port}`]);
        assert.ok(kafka.pid > 0);
        assert.ok(processExists(kafka.pid));
        assert.equal(kafka.logFile, join(dataDir, 'logs', 'server.log'));
        await probeBroker(kafka.brokers, { timeoutMs: 30_000 });
      },
    );

    await t.test('local kafka should treat a second start on the same port as a no-op', async () => {
      const again = await startLocalKafka({ port, dataDir });
      assert.equal(again.alreadyRunning, true);
      assert.equal(again.pid, kafka.pid);
      assert.equal(again.version, kafka.version);
      assert.deepEqual(again.brokers, kafka.brokers);
    });

    await t.test(
      'kafka start should fail, naming both versions and the stop command, when another version runs',
      async () => {
        assert.doesNotMatch(kafka.version, /^3\.9\./, 'the default version is a 4.x');
        const r = await sluiceKafka([
          'start',
          '--version',
          '3.9',
          '--port',
          String(port),
          '--data-dir',
          dataDir,
        ]);
        assert.equal(r.code, 1, r.stdout + r.stderr);
        assert.equal(r.stdout, '');
        assert.ok(
          r.stderr.includes(
            `Kafka ${kafka.version} is already running at 127.0.0.1:${port} (pid ${kafka.pid}, data ${dataDir}), ` +
              `not the 3.9 asked for; stop it first with: sluice kafka stop --port ${port} --data-dir ${dataDir}`,
          ),
          r.stderr,
        );
        const same = await sluiceKafka([
          'start',
          '--version',
          kafka.version,
          '--port',
          String(port),
          '--data-dir',
          dataDir,
        ]);
        assert.equal(same.code, 0, same.stderr);
        assert.match(
          same.stdout,
          new RegExp(
            `^Kafka ${kafka.version} already running at 127\\.0\\.0\\.1:${port} \\(pid ${kafka.pid},`,
          ),
        );
        assert.ok(processExists(kafka.pid), 'the running broker is left alone');
      },
    );

    await t.test('local kafka should say the broker runs, with its pid', async () => {
      const status = await localKafkaStatus({ port, dataDir });
      assert.equal(status.running, true);
      assert.equal(status.pid, kafka.pid);
      assert.equal(status.version, kafka.version);
      assert.deepEqual(status.brokers, kafka.brokers);
    });

    await t.test('local kafka should stop the broker and its process', async () => {
      const stopping = Date.now();
      assert.equal(await stopLocalKafka({ port, dataDir }), true);
      t.diagnostic(`stopped in ${Date.now() - stopping} ms`);
      assert.equal(processExists(kafka.pid), false);
      assert.equal((await localKafkaStatus({ port, dataDir })).running, false);
      assert.equal(await brokerAnswers(kafka.brokers, 1_000), false);
      assert.equal(await stopLocalKafka({ port, dataDir }), false, 'a second stop finds nothing');
    });
  },
);

test(
  'two kafka starts at once on a fresh data dir should both succeed with one broker between them',
  TIMEOUT,
  async (t) => {
    const { port, dataDir } = await ownBroker(t);
    // Both see no broker and go on to format: the data dir's lock makes the later one wait, then
    // reuse the broker the earlier one started. Without it, the loser died on a StorageTool or bind
    // error, and its clean-up deleted the winner's pid file.
    const started = Date.now();
    const args = ['start', '--port', String(port), '--data-dir', dataDir];
    const runs = await Promise.all([sluiceKafka(args), sluiceKafka(args)]);
    t.diagnostic(`both done in ${Date.now() - started} ms`);
    for (const r of runs) assert.equal(r.code, 0, r.stdout + r.stderr);
    const ready = runs.filter((r) => / ready at /.test(r.stdout));
    const reused = runs.filter((r) => / already running at /.test(r.stdout));
    assert.equal(ready.length, 1, runs.map((r) => r.stdout).join(''));
    assert.equal(reused.length, 1, runs.map((r) => r.stdout).join(''));
    assert.match(reused[0]!.stderr, /Waiting for /, 'the later start waited for the earlier one');
    const status = await localKafkaStatus({ port, dataDir });
    assert.equal(status.running, true);
    for (const r of runs) assert.ok(r.stdout.includes(`(pid ${status.pid},`), r.stdout);
    assert.deepEqual(brokerPidsOf(dataDir), [status.pid], 'exactly one broker JVM');
    assert.equal(existsSync(join(dataDir, '.lock')), false, 'the start lock is released');
    assert.equal(await stopLocalKafka({ port, dataDir }), true);
    assert.deepEqual(brokerPidsOf(dataDir), []);
  },
);

test('local kafka should start, answer and stop Kafka 3.9 too', TIMEOUT, async (t) => {
  const { port, dataDir } = await ownBroker(t);
  const started = Date.now();
  const log = (msg: string) => t.diagnostic(`+${Date.now() - started} ms ${msg}`);
  const kafka = await startLocalKafka({ version: '3.9', port, dataDir, log });
  t.diagnostic(`Kafka ${kafka.version} ready in ${Date.now() - started} ms`);
  assert.match(kafka.version, /^3\.9\.\d+$/);
  assert.equal(kafka.alreadyRunning, false);
  await probeBroker(kafka.brokers, { timeoutMs: 30_000 });
  assert.equal((await localKafkaStatus({ port, dataDir })).running, true);
  assert.equal(await stopLocalKafka({ port, dataDir }), true);
  assert.equal(processExists(kafka.pid), false);
});

test('local kafka should report the log tail when the broker dies during start-up', TIMEOUT, async (t) => {
  const { port, dataDir } = await ownBroker(t);
  // A 1 MB heap is too small for any JVM: it exits at once, after writing why to the log.
  await assert.rejects(startLocalKafka({ port, dataDir, heapMb: 1 }), (err: Error) => {
    assert.match(err.message, /exited during start-up/);
    assert.ok(err.message.includes(join(dataDir, 'logs', 'server.log')), err.message);
    assert.match(err.message, /heap/i);
    return true;
  });
  assert.equal((await localKafkaStatus({ port, dataDir })).running, false);
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
