/**
 * The CLI outside the demo: `sluice topics create/list` on the test broker, `sluice dev` that
 * must not start a broker or create topics when the brokers come from a config file, and
 * `sluice dev` on a fresh broker of its own running the example job fed by the example load
 * generator (nothing created by hand).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { clicks, generateClicks } from '../../examples/load-generator.js';
import { brokers, deleteTopicsMatching, eventually, uniqueName, withAdmin } from '../helpers/kafka.js';
import { freeBrokerPort } from '../helpers/ports.js';
import { distPath, metricSum, SLUICE_BIN, spawnWorker } from '../helpers/workers.js';

/** Runs the CLI to its end; KAFKA_BROKERS is the test broker unless `env` says otherwise. */
function sluice(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [SLUICE_BIN, ...args], {
    encoding: 'utf8',
    env: { ...process.env, KAFKA_BROKERS: brokers().join(','), ...env },
    timeout: 120_000,
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

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
