#!/usr/bin/env node
// The test command: starts a local Kafka (unless KAFKA_BROKERS points at one), runs every test
// with Node's runner against it, and stops the broker it started, whatever the outcome.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freeBrokerPort, portInUse, signalGroup } from '../dist/src/dev/broker-process.js';
import { runFiles } from '../dist/src/dev/kafka-config.js';
import { startLocalKafka, stopLocalKafka } from '../dist/src/dev/local-kafka.js';

const PORT_ENV = 'SLUICE_TEST_KAFKA_PORT_BASE';
/** Test files run alone, before the others (see below). */
const ALONE = /(^|\/)(overload|cluster(-[a-z-]+)?)\.test\.js$/;
const DEFAULT_PORT = 39092;
/** Pairs of ports (client, controller) tried from the base: base, base + 2, … */
const PORT_PAIRS = 10;
/** Starts tried when the ports found free are taken before the broker binds them. */
const START_ATTEMPTS = 3;

const USAGE = `Usage: node scripts/run-tests.mjs [test files or folders...]

Runs dist/test/unit and dist/test/integration (or the given files and folders) with node --test.
With KAFKA_BROKERS set, the tests use that broker. Otherwise a Kafka is started for the run from a
temporary data dir, and stopped and deleted after it: on the first free pair of ports (client,
controller) among ${PORT_ENV} (default ${DEFAULT_PORT}), +2, +4, … +${2 * PORT_PAIRS - 2}; when
${PORT_ENV} is unset and all of those are taken, on a pair the OS picks.`;

const say = (msg) => process.stderr.write(`[kafka] ${msg}\n`);
/** Ends the run with one line saying why (no stack trace); the exit handler cleans up. */
const fail = (msg) => {
  process.stderr.write(`run-tests: ${msg}\n`);
  process.exit(1);
};

const args = process.argv.slice(2);
if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}

/** The broker this run started: its ports and data dir, once chosen. */
let broker;
let stopped = false;
let child;
let signalled;
// Every way out, an uncaught error included, removes the data dir; a broker that was not stopped
// the orderly way (pid file still there) is killed first, so none outlives the run.
process.on('exit', () => {
  if (!broker) return;
  if (!stopped) killLeftBroker(broker.dataDir);
  rmSync(broker.dataDir, { recursive: true, force: true });
});
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    if (child) {
      child.kill(sig);
    } else if (signalled) {
      process.exit(130);
    } else {
      signalled = sig;
      say(`${sig}: stopping once the broker start settles (again to force)`);
    }
  });
}

const targets = (args.length > 0 ? args : ['dist/test/unit', 'dist/test/integration']).flatMap(testFiles);

const env = { ...process.env };
delete env[PORT_ENV];
if (!env.KAFKA_BROKERS) {
  const t0 = Date.now();
  const k = await startTestKafka();
  if (signalled) {
    await stopBroker();
    process.exit(130);
  }
  env.KAFKA_BROKERS = k.brokers.join(',');
  say(`${k.version} ready at ${env.KAFKA_BROKERS} in ${Date.now() - t0} ms (log ${k.logFile})`);
}
// Files that measure the worker against the machine (the overload tests check shedding against
// the true capacity of an injected cost, within 10 %) run first and alone: beside another test
// file on 2 cores they measure the neighbour. So do the cluster tests (cluster*.test.js): each
// starts a 3-node Kafka of its own and times takeovers and rebalances against session timeouts,
// which a neighbour's three more JVMs would stretch. Every other file runs two at a time.
const alone = targets.filter((f) => ALONE.test(f));
const shared = targets.filter((f) => !ALONE.test(f));
const totals = { pass: 0, fail: 0, skipped: 0 };
let code = 0;
for (const [files, concurrency] of [
  [alone, 1],
  [shared, 2],
]) {
  if (files.length === 0 || signalled) continue;
  const c = await runNodeTest(files, concurrency);
  if (c !== 0) code = c;
}
await stopBroker();
// One line for both runs (the last runner's own summary counts only its files).
if (alone.length > 0 && shared.length > 0)
  process.stdout.write(`${totals.pass} passed, ${totals.fail} failed, ${totals.skipped} skipped\n`);
process.exit(code);

/**
 * One `node --test` run; its output goes through, and its summary counts are added to `totals`.
 * --test-force-exit: a test file whose tests all finished must not keep the run alive through a
 * handle someone forgot (a kafkajs retry once kept one open for 10 minutes after passing).
 */
async function runNodeTest(files, concurrency) {
  child = spawn(
    process.execPath,
    ['--test', `--test-concurrency=${concurrency}`, '--test-force-exit', ...files],
    { stdio: ['inherit', 'pipe', 'inherit'], env },
  );
  let tail = '';
  child.stdout.on('data', (d) => {
    process.stdout.write(d);
    tail = (tail + d.toString()).slice(-4096);
  });
  const exit = await new Promise((r) => child.once('exit', (c, s) => r(c ?? (s ? 1 : 0))));
  for (const key of Object.keys(totals)) {
    const m = new RegExp(`^(?:#|\u2139) ${key} (\\d+)$`, 'm').exec(tail);
    if (m) totals[key] += Number(m[1]);
  }
  return exit;
}

/**
 * A folder as the test files in it (`*.test.js`, at any depth, sorted): from Node 22 on,
 * `node --test` takes its arguments as files or globs and no longer searches a folder.
 */
function testFiles(target) {
  let dir;
  try {
    dir = statSync(target).isDirectory();
  } catch {
    fail(`no such test file or folder: ${target} (run \`npm run build\` first?)`);
  }
  if (!dir) return [target];
  return readdirSync(target, { recursive: true })
    .filter((f) => /\.test\.[cm]?js$/.test(f))
    .sort()
    .map((f) => join(target, f));
}

/** Starts the run's broker on free ports, trying again on others if they are taken meanwhile. */
async function startTestKafka() {
  const asked = process.env[PORT_ENV] || undefined;
  let base = asked === undefined ? DEFAULT_PORT : Number(asked);
  if (!/^\d+$/.test(asked ?? '0') || base < 1 || base > 65534) {
    fail(`${PORT_ENV} must be a port number from 1 to 65534, got "${asked}"`);
  }
  for (let attempt = 1; ; attempt++) {
    const port = (await freePair(base)) ?? (asked === undefined ? await freeBrokerPort() : undefined);
    if (port === undefined) {
      fail(
        `ports ${base}-${base + 2 * PORT_PAIRS - 1} on 127.0.0.1 are all in use; set ${PORT_ENV} to a free ` +
          'port (the broker takes it and the next one), or KAFKA_BROKERS to use a running broker',
      );
    }
    if (port !== base) say(`port ${base} or ${base + 1} is taken; using ${port} (controller ${port + 1})`);
    broker = { port, dataDir: mkdtempSync(join(tmpdir(), 'sluice-test-kafka-')) };
    try {
      return await startLocalKafka({ port, dataDir: broker.dataDir, log: say });
    } catch (err) {
      // The launcher kills a broker that failed to start; its data dir goes with it.
      rmSync(broker.dataDir, { recursive: true, force: true });
      broker = undefined;
      const lost = (await portInUse(port)) || (await portInUse(port + 1));
      if (lost && attempt < START_ATTEMPTS && !signalled) {
        say(`port ${port} or ${port + 1} was taken meanwhile; trying others`);
        base = port + 2;
        continue;
      }
      const [first, ...detail] = String(err instanceof Error ? err.message : err).split('\n');
      const hint = lost
        ? ` (set ${PORT_ENV} to use other ports, or KAFKA_BROKERS to use a running broker)`
        : '';
      // The broker's log tail, if any, follows: the log itself goes with the data dir.
      fail(
        `cannot start the test Kafka on 127.0.0.1:${port}: ${first}${hint}${detail.map((l) => `\n${l}`).join('')}`,
      );
    }
  }
}

/** The first of `base`, `base + 2`, … that is free with its next port (the controller's). */
async function freePair(base) {
  for (let port = base; port < base + 2 * PORT_PAIRS && port < 65535; port += 2) {
    if (!(await portInUse(port)) && !(await portInUse(port + 1))) return port;
  }
  return undefined;
}

async function stopBroker() {
  if (!broker) return;
  await stopLocalKafka({ port: broker.port, dataDir: broker.dataDir }).then(
    () => {
      stopped = true;
    },
    (e) => say(`stop failed: ${e}`),
  );
}

/** Kills the process group of the broker recorded in `dataDir`, if any (the exit handler must be synchronous). */
function killLeftBroker(dataDir) {
  try {
    const pid = Number(readFileSync(runFiles(dataDir).pidFile, 'utf8').trim());
    // Never 0: kill(-0) would signal our own process group.
    if (Number.isInteger(pid) && pid > 0) signalGroup(pid, 'SIGKILL');
  } catch {}
}
