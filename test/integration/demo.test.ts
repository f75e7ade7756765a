import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { brokers, deleteTopicsMatching, uniqueName } from '../helpers/kafka.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const DEMO = join(root, 'dist/scripts/demo.js');

test('demo should run the page-views job end to end, print flowing page counts and the metrics URL, and exit 0', {
  timeout: 120_000,
}, async (t) => {
  const id = uniqueName('t-demo');
  t.after(() => deleteTopicsMatching(id));
  t.after(() => rm(join(tmpdir(), 'sluice-demo', id), { recursive: true, force: true }));
  const child = spawn(process.execPath, [DEMO, '--duration', '25', '--http-port', '0'], {
    env: {
      ...process.env,
      KAFKA_BROKERS: brokers().join(','),
      DEMO_APP_ID: id,
      DEMO_CLICKS_TOPIC: `${id}-clicks`,
      DEMO_PAGE_VIEWS_TOPIC: `${id}-page-views`,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let metrics: Promise<string> | undefined;
  const onData = (d: Buffer) => {
    out += d.toString();
    const m = /metrics: (http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(out);
    // Scrape once while the demo runs: the URL it prints must serve the worker's metrics.
    if (m && !metrics) {
      metrics = new Promise((r) => setTimeout(r, 3000)).then(async () => (await fetch(m[1]!)).text());
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const code = await new Promise<number | string>((r) => child.once('exit', (c, s) => r(c ?? s ?? -1)));

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
