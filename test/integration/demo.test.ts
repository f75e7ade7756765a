import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { type TestContext, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { brokers, deleteTopicsMatching, eventually, uniqueName, withAdmin } from '../helpers/kafka.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const DEMO = join(root, 'dist/scripts/demo.js');

/**
 * Runs the demo against the suite's broker (the demo starts its own only on 9092) with its own app
 * id and topics, deleted after the test, as the leader of a new process group: whatever it starts
 * stays in that group, so the test can tell that all of it is gone. `output()` is its stdout and
 * stderr so far.
 */
function startDemo(t: TestContext, args: string[]) {
  const id = uniqueName('t-demo');
  t.after(() => deleteTopicsMatching(id));
  t.after(() => rm(join(tmpdir(), 'sluice-demo', id), { recursive: true, force: true }));
  const child = spawn(process.execPath, [DEMO, '--http-port', '0', ...args], {
    env: {
      ...process.env,
      KAFKA_BROKERS: brokers().join(','),
      DEMO_APP_ID: id,
      DEMO_CLICKS_TOPIC: `${id}-clicks`,
      DEMO_PAGE_VIEWS_TOPIC: `${id}-page-views`,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  const collect = (d: Buffer) => {
    out += d.toString();
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const exited = new Promise<number | string>((r) => child.once('close', (c, s) => r(c ?? s ?? -1)));
  t.after(() => {
    if (groupAlive(child.pid!)) process.kill(-child.pid!, 'SIGKILL');
  });
  return { id, child, exited, output: () => out };
}

/** Whether any process of the group `pgid` is left. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

test('demo should run the page-views job end to end, print flowing page counts and the metrics URL, and exit 0', {
  timeout: 120_000,
}, async (t) => {
  const { id, child, exited, output } = startDemo(t, ['--duration', '25']);
  let metrics: Promise<string> | undefined;
  const onData = () => {
    const m = /metrics: (http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(output());
    // Scrape once while the demo runs: the URL it prints must serve the worker's metrics.
    if (m && !metrics) {
      metrics = new Promise((r) => setTimeout(r, 3000)).then(async () => (await fetch(m[1]!)).text());
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const code = await exited;
  const out = output();
  assert.equal(code, 0, `demo exited with ${code}:\n${out}`);
  assert.match(out, /metrics: http:\/\/127\.0\.0\.1:\d+\/metrics/, 'prints where metrics are served');
  assert.ok(metrics, 'metrics URL printed');
  const text = await metrics;
  assert.match(text, new RegExp(`sluice_records_in_total\\{[^}]*app="${id}"`), 'metrics of the demo worker');

  // Lines like: [ 12s] clicks in 2400 (+200/s)  page-views out 2200 (+190/s)  top pages: / 700, /pricing 350, ...
  const counts = out
    .split('\n')
    .map((l) => /page-views out (\d+).*top pages: (\/\S* \d+(?:, \/\S* \d+)*)$/.exec(l))
    .filter((m) => m !== null);
  assert.ok(counts.length >= 5, `expected several lines of page counts, got ${counts.length}:\n${out}`);
  const last = counts.at(-1)!;
  const top = last[2]!.split(', ').map((s) => Number(s.split(' ')[1]));
  assert.equal(top.length, 5, 'top 5 pages');
  assert.ok(top[0]! > 0, 'counts are positive');
  assert.deepEqual(
    top,
    [...top].sort((a, b) => b - a),
    'top pages sorted by count',
  );
  assert.ok(Number(last[1]) > 500, `output should flow at ~200/s, saw ${last[1]} updates:\n${out}`);
  assert.match(out, /demo stopped\n/);
});

test('demo should stop on SIGINT (Ctrl-C) once output flows: worker out of the group, nothing left running, exit 0', {
  timeout: 120_000,
}, async (t) => {
  const { id, child, exited, output } = startDemo(t, []);
  await Promise.race([
    eventually(() => /page-views out [1-9]\d*.*top pages: \//.test(output()), {
      timeoutMs: 60_000,
      what: 'page counts in the output of the demo',
    }),
    exited.then((c) => assert.fail(`demo exited (${c}) before output flowed:\n${output()}`)),
  ]);
  assert.equal(
    await withAdmin(async (a) => (await a.describeGroups([id])).groups[0]!.members.length),
    1,
    'the worker is in its consumer group while the demo runs',
  );

  const stopping = Date.now();
  child.kill('SIGINT');
  const code = await exited;
  const out = output();
  t.diagnostic(`exited ${Date.now() - stopping} ms after SIGINT`);
  assert.equal(code, 0, `demo exited with ${code}:\n${out}`);
  assert.match(out, /SIGINT: stopping/);
  assert.match(out, /stopping the worker \(checkpoint, leave the group\)/);
  assert.match(out, /demo stopped\n$/, 'stopped without errors');
  assert.doesNotMatch(out, /stopping the local Kafka/, "the suite's broker is not the demo's to stop");
  assert.equal(groupAlive(child.pid!), false, 'no process of the demo is left');
  const group = await withAdmin(async (a) => (await a.describeGroups([id])).groups[0]!);
  assert.deepEqual(group.members, [], `the worker left its group (state ${group.state})`);
});
