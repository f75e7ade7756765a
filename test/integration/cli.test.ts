/**
 * The CLI outside the demo: help, version and usage errors (no stack traces), a busy HTTP port,
 * a closed stdout, `topology --format`, `sluice topics create/list/delete`, `produce` and `tail`
 * (read_committed or not) on the test broker, `sluice dev` that
 * must not start a broker or create topics when the brokers come from a config file, and
 * `sluice dev` on a fresh broker of its own running the example job fed by the example load
 * generator (nothing created by hand).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { clicks, generateClicks } from '../../examples/load-generator.js';
import {
  brokers,
  createTopics,
  deleteTopicsMatching,
  eventually,
  testKafka,
  uniqueName,
  withAdmin,
} from '../helpers/kafka.js';
import { freeBrokerPort, freePort } from '../helpers/ports.js';
import { distPath, metricSum, SLUICE_BIN, spawnWorker } from '../helpers/workers.js';

/** Runs the CLI to its end; KAFKA_BROKERS is the test broker unless `env` says otherwise. */
function sluice(args: string[], env: Record<string, string> = {}, input?: string) {
  const r = spawnSync(process.execPath, [SLUICE_BIN, ...args], {
    encoding: 'utf8',
    env: { ...process.env, KAFKA_BROKERS: brokers().join(','), ...env },
    timeout: 120_000,
    ...(input === undefined ? {} : { input }),
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

const NO_STACK = /\n\s+at /;

test('sluice --version and every command --help should answer on stdout and exit 0', () => {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'));
  assert.deepEqual(sluice(['--version']), { code: 0, out: `${pkg.version}\n`, err: '' });
  for (const cmd of ['run', 'dev', 'topology', 'plan', 'reset', 'topics', 'produce', 'tail', 'kafka']) {
    const r = sluice([cmd, '--help']);
    assert.equal(r.code, 0, `${cmd} --help: ${r.err}`);
    assert.match(r.out, new RegExp(`[Uu]sage:[\\s\\S]*sluice ${cmd}`), `${cmd} --help prints its usage`);
    assert.equal(r.err, '');
  }
  assert.match(sluice(['run', 'job.ts', '--help']).out, /Usage: sluice run <job-file>/);
  assert.match(sluice(['help', 'tail']).out, /--read-committed/);
});

test('usage errors should say what is wrong and show the usage, without a stack trace', () => {
  const noJob = sluice(['run']);
  assert.equal(noJob.code, 1);
  assert.match(noJob.err, /^sluice: run needs a job file\n\nUsage: sluice run <job-file>/);
  assert.doesNotMatch(noJob.err, NO_STACK);
  const typo = sluice(['topolgy', 'job.ts']);
  assert.equal(typo.code, 1);
  assert.match(typo.err, /unknown command "topolgy" \(did you mean "topology"\?\)/);
  const action = sluice(['topics', 'creat', 'x']);
  assert.equal(action.code, 1);
  assert.match(action.err, /not "creat" \(did you mean "create"\?\)/);
  const format = sluice(['topology', distPath('examples/page-views.js'), '--format', 'svg']);
  assert.equal(format.code, 1);
  assert.match(format.err, /--format must be text, json or dot, not "svg"/);
  for (const r of [typo, action, format]) assert.doesNotMatch(r.err, NO_STACK);
});

test('sluice run on a busy HTTP port should say so and how to pick another, not throw EADDRINUSE', async (t) => {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  const port = (server.address() as { port: number }).port;
  const r = sluice([
    'run',
    distPath('test/fixtures/jobs/stateless.js'),
    '--http-host',
    '127.0.0.1',
    '--http-port',
    String(port),
  ]);
  assert.equal(r.code, 1, r.err);
  assert.match(r.err, new RegExp(`sluice: the HTTP port 127\\.0\\.0\\.1:${port} is in use .*--http-port N`));
  assert.doesNotMatch(r.err, NO_STACK);
});

test('sluice topology should not crash when its reader goes away (EPIPE), and print json and dot', async () => {
  const child = spawn(process.execPath, [SLUICE_BIN, 'topology', distPath('examples/page-views.js')], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.destroy(); // like `| head` having exited before the first line
  let err = '';
  child.stderr.on('data', (d) => {
    err += d;
  });
  const code = await new Promise((r) => child.once('exit', r));
  assert.equal(code, 0, err);
  assert.equal(err, '');
  const json = sluice(['topology', distPath('examples/page-views.js'), '--format', 'json']);
  assert.equal(json.code, 0, json.err);
  const doc = JSON.parse(json.out);
  assert.equal(doc.appId, 'page-views');
  assert.deepEqual(
    doc.subtopologies.map((s: { sourceTopics: string[] }) => s.sourceTopics),
    [['clicks'], ['page-views-by-page-repartition']],
  );
  const dot = sluice(['topology', distPath('examples/page-views.js'), '--format', 'dot']);
  assert.equal(dot.code, 0, dot.err);
  assert.match(dot.out, /^digraph "page-views" \{\n[\s\S]*"topic:clicks" -> "source-0";[\s\S]*\}\n$/);
});

test('sluice topics delete should delete only with --yes and name topics that do not exist', async (t) => {
  const a = uniqueName('t-cli-del');
  t.after(() => deleteTopicsMatching(a));
  assert.equal(sluice(['topics', 'create', a, '--partitions', '1']).code, 0);
  const near = a.slice(0, -1);
  t.after(() => deleteTopicsMatching(near));
  const typoCreate = sluice(['topics', 'create', near, '--partitions', '1']);
  assert.equal(typoCreate.code, 0, typoCreate.err);
  assert.equal(typoCreate.err, `warning: creating topic "${near}", but "${a}" exists: a typo?\n`);
  const dry = sluice(['topics', 'delete', a]);
  assert.equal(dry.code, 2, dry.err);
  assert.match(dry.out, new RegExp(`would delete ${a} and all their records`));
  assert.ok((await withAdmin((x) => x.listTopics())).includes(a), 'still there without --yes');
  const typo = `${a}x`;
  const del = sluice(['topics', 'delete', a, typo, '--yes']);
  assert.equal(del.code, 1, 'one of the two did not exist');
  assert.equal(del.out, `${a}: deleted\n`);
  assert.match(del.err, new RegExp(`${typo}: no such topic \\(did you mean "${a}"\\?\\)`));
  await eventually(async () => !(await withAdmin((x) => x.listTopics())).includes(a), {
    timeoutMs: 30_000,
    what: `${a} deleted`,
  });
  assert.match(
    sluice(['topics', 'delete', '__consumer_offsets', '--yes']).err,
    /refusing to delete Kafka's own/,
  );
});

test('sluice produce and tail should write lines and print them back, read_committed when asked', async (t) => {
  const topic = uniqueName('t-cli-tail');
  t.after(() => deleteTopicsMatching(topic));
  await createTopics([{ topic, partitions: 1 }]);
  const fromArgs = sluice(['produce', topic, 'k1:one', '--key-separator', ':']);
  assert.equal(fromArgs.code, 0, fromArgs.err);
  assert.equal(fromArgs.err, `produced 1 record to ${topic}\n`);
  // An aborted and a committed transaction, as a job's exactly-once producer leaves them.
  const p = testKafka().producer({
    transactionalId: `${topic}-tx`,
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await p.connect();
  try {
    const aborted = await p.transaction();
    await aborted.send({ topic, messages: [{ key: 'k2', value: 'aborted' }] });
    await aborted.abort();
    const committed = await p.transaction();
    await committed.send({ topic, messages: [{ key: 'k3', value: 'committed' }] });
    await committed.commit();
  } finally {
    await p.disconnect();
  }
  const fromStdin = sluice(['produce', topic, '--key-separator', '='], {}, 'k4=four\n\nno-key\n');
  assert.equal(fromStdin.code, 0, fromStdin.err);
  assert.equal(fromStdin.err, `produced 2 records to ${topic}\n`);
  // Offsets: 0 one, 1 aborted, 2 its abort marker, 3 committed, 4 its commit marker, 5 four, 6 no-key.
  const committed = sluice(['tail', topic, '--from-beginning', '--read-committed', '--max-records', '4']);
  assert.equal(committed.code, 0, committed.err);
  assert.equal(committed.out, '0\t0\tk1\tone\n0\t3\tk3\tcommitted\n0\t5\tk4\tfour\n0\t6\tnull\tno-key\n');
  const all = sluice(['tail', topic, '--from-beginning', '--max-records', '5', '--format', 'json']);
  assert.equal(all.code, 0, all.err);
  const values = all.out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l).value);
  assert.deepEqual(
    values,
    ['one', 'aborted', 'committed', 'four', 'no-key'],
    'read_uncommitted shows the aborted write',
  );
  const missing = sluice(['tail', topic.slice(0, -1)]);
  assert.equal(missing.code, 1);
  assert.equal(
    missing.err,
    `sluice: topic "${topic.slice(0, -1)}" does not exist (did you mean "${topic}"?); create it with sluice topics create ${topic.slice(0, -1)}\n`,
  );
  assert.doesNotMatch(missing.err, NO_STACK);
});

test('sluice topics create should create missing topics once and list them with their partitions', async (t) => {
  const a = uniqueName('t-cli-a');
  const b = uniqueName('t-cli-b');
  t.after(() => Promise.all([deleteTopicsMatching(a), deleteTopicsMatching(b)]));
  const first = sluice(['topics', 'create', a, b, '--partitions', '3']);
  assert.equal(first.code, 0, first.err);
  assert.equal(first.out, `${a}: created, 3 partitions\n${b}: created, 3 partitions\n`);
  const again = sluice(['topics', 'create', a, '--partitions', '5']);
  assert.equal(again.code, 0, again.err);
  assert.equal(again.out, `${a}: exists, 3 partitions\n`);
  const list = sluice(['topics', 'list']);
  assert.equal(list.code, 0, list.err);
  assert.ok(list.out.split('\n').includes(`${a}\t3`), list.out);
  assert.ok(!list.out.includes('__consumer_offsets'), 'Kafka-internal topics are not listed');
  const bad = sluice(['topics', 'create', uniqueName('t-cli-c'), '--partitions', '0']);
  assert.equal(bad.code, 1);
  assert.match(bad.err, /flag --partitions: expected a whole number ≥ 1, got 0/);
});

test('sluice dev with brokers from a config file should use them, start no broker and create no topic', async () => {
  const id = uniqueName('t-cli-dev');
  const dir = mkdtempSync(join(tmpdir(), 'sluice-cfg-'));
  const file = join(dir, 'sluice.yaml');
  writeFileSync(file, `kafka:\n  brokers: [${brokers().join(', ')}]\n`);
  const env = { KAFKA_BROKERS: '', TEST_APP_ID: id, TEST_INPUT: `${id}-in`, TEST_OUTPUT: `${id}-out` };
  const r = sluice(
    ['dev', distPath('test/fixtures/jobs/stateless.js'), '--config', file, '--http-port', '0'],
    env,
  );
  assert.equal(r.code, 1, `${r.out}\n${r.err}`);
  assert.match(r.err, new RegExp(`using the cluster set by file ${file}: ${brokers().join(',')}`));
  assert.doesNotMatch(r.err, /local Kafka/);
  assert.match(`${r.out}${r.err}`, /topics missing on the cluster: .*npx sluice topics create/);
  const topics = await withAdmin((a) => a.listTopics());
  assert.ok(!topics.some((x) => x.startsWith(id)), 'nothing was created on the configured cluster');
});

test('sluice dev with a bad config should list every problem before it starts a broker', async () => {
  const port = await freePort();
  const r = sluice(
    [
      'dev',
      distPath('test/fixtures/jobs/stateless.js'),
      '--kafka-port',
      String(port),
      '--processing.guarantee',
      'exactly-once',
      '--http.port',
      'abc',
    ],
    { KAFKA_BROKERS: '' },
  );
  assert.equal(r.code, 1, `${r.out}\n${r.err}`);
  assert.match(r.err, /Invalid configuration \(2 problems\)/);
  assert.match(r.err, /processing\.guarantee \(flag --processing\.guarantee\): Invalid option/);
  assert.match(r.err, /flag --http\.port: expected a number, got "abc"/);
  assert.doesNotMatch(r.err, /local Kafka/, 'no broker was started for a config that cannot run');
  const listening = await new Promise<boolean>((done) => {
    const s = connect({ port, host: '127.0.0.1' }, () => {
      s.destroy();
      done(true);
    });
    s.on('error', () => done(false));
  });
  assert.equal(listening, false, `nothing listens on ${port}`);
});

test('sluice dev without a configured cluster should start its own Kafka and run the example job on the load generator', {
  timeout: 240_000,
}, async (t) => {
  const port = await freeBrokerPort();
  const local = `127.0.0.1:${port}`;
  const worker = spawnWorker(distPath('examples/clicks.js'), {
    name: 'dev',
    command: 'dev',
    env: { KAFKA_BROKERS: '', CLICKS_APP_ID: uniqueName('t-cli-clicks') },
    args: ['--kafka-port', String(port)],
  });
  t.after(async () => {
    await worker.kill('SIGKILL');
    const stop = spawn(process.execPath, [SLUICE_BIN, 'kafka', 'stop', '--port', String(port), '--wipe'], {
      env: { ...process.env, KAFKA_BROKERS: '' },
      stdio: 'ignore',
    });
    await new Promise((r) => stop.once('exit', r));
  });
  try {
    await eventually(async () => (await fetch(`${await worker.url()}/readyz`)).status === 200, {
      timeoutMs: 180_000,
      what: 'the dev worker ready on its own broker',
    });
    const logs = worker.logs.join('\n');
    assert.match(logs, new RegExp(`local Kafka \\S+ at ${local} `));
    assert.match(logs, /created topics clicks, human-clicks \(4 partitions\)/);
    assert.match(logs, /status page: http:\/\/\S+\/ \(metrics /);
    const count = 300;
    const sent = await generateClicks({ brokers: [local], topic: 'clicks', ratePerSec: 3000, count });
    assert.equal(sent.sent, count);
    const source = clicks(1);
    let humans = 0;
    for (let i = 0; i < count; i++) if (!source.next().value!.bot) humans++;
    await eventually(
      async () => {
        const m = await worker.metrics();
        return (
          metricSum(m, 'sluice_records_in_total', { topic: 'clicks' }) === count &&
          metricSum(m, 'sluice_records_out_total', { topic: 'human-clicks' }) === humans
        );
      },
      { timeoutMs: 60_000, what: `${count} clicks in, ${humans} human clicks out` },
    );
    assert.equal(await worker.kill('SIGTERM'), 0, 'a graceful stop');
  } catch (e) {
    console.error(worker.logs.slice(-40).join('\n'));
    throw e;
  }
});
