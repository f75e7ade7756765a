import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CHROMIUM, openChromium } from '../helpers/chromium.js';
import { deleteTopicsMatching, eventually, jobTopics, produce } from '../helpers/kafka.js';
import { skipUnlessPresent } from '../helpers/prereq.js';
import { spawnWorker } from '../helpers/workers.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
// The screenshot kept in docs/ is refreshed on demand (TEST_SCREENSHOT=1), so that a test run
// leaves the work tree clean; otherwise it goes to the temp folder.
const SCREENSHOT = process.env.TEST_SCREENSHOT
  ? join(root, 'docs/status-page.png')
  : join(tmpdir(), `sluice-status-page-${process.pid}.png`);

interface PageView {
  nodes: string[];
  edges: number;
  rates: Record<string, string>;
  totals: Record<string, string>;
  updated: string;
  tasks: number;
}

const READ_PAGE = `(() => {
  const nodes = [...document.querySelectorAll('#graph g.node')];
  return {
    nodes: nodes.map((n) => n.dataset.name),
    edges: document.querySelectorAll('#graph path.edge').length,
    rates: Object.fromEntries(nodes.map((n) => [n.dataset.name, n.querySelector('.rate').textContent])),
    totals: Object.fromEntries(nodes.map((n) => [n.dataset.name, n.querySelector('.total').textContent])),
    updated: document.getElementById('updated').textContent,
    tasks: document.querySelectorAll('#tasks tbody tr').length,
  };
})()`;

test('the status page should draw the topology and show numbers that change under load', {
  timeout: 180_000,
}, async (t) => {
  // Skipped without chromium, except in CI (.ci/run installs it), where it fails.
  if (skipUnlessPresent(t, CHROMIUM ? undefined : 'chromium is not installed (apt-get install -y chromium)'))
    return;
  const { id, input, env } = await jobTopics('t-status-page', 2);
  const w = spawnWorker('running-sum', { name: 'w', env });
  let loading = true;
  const load = (async () => {
    // Steady load while the page is watched: a small batch every 100 ms.
    for (let i = 0; loading; i++) {
      await produce(
        input,
        Array.from({ length: 50 }, (_, j) => ({
          key: null,
          value: JSON.stringify({ k: `k${(i * 50 + j) % 20}`, v: 1, seq: i * 50 + j }),
        })),
      );
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const page = await openChromium({ width: 1500, height: 950 });
  t.after(async () => {
    loading = false;
    await load.catch(() => undefined);
    await page.close();
    await w.kill('SIGTERM');
    await deleteTopicsMatching(id);
  });
  const url = await w.url();
  await eventually(async () => (await (await fetch(`${url}/readyz`)).status) === 200, {
    timeoutMs: 90_000,
    what: 'worker ready',
  });
  await page.navigate(`${url}/`);
  const first = (await eventually(
    async () => {
      const v = await page.evaluate<PageView>(READ_PAGE);
      return v.nodes.length > 0 && /rec\/s/.test(v.rates.sum ?? '') && !v.rates.sum!.startsWith('–')
        ? v
        : undefined;
    },
    { timeoutMs: 30_000, what: 'the page to draw the graph and a first rate' },
  ))!;
  // Every operator of the job is a node; chain edges, the repartition edge and the topic edges.
  for (const name of ['by-k-select', 'by-k-sink', 'by-k-source', 'sum'])
    assert.ok(first.nodes.includes(name), name);
  assert.ok(first.edges >= first.nodes.length, `edges drawn (${first.edges})`);
  assert.ok(first.tasks > 0, 'task table filled');

  const second = (await eventually(
    async () => {
      await new Promise((r) => setTimeout(r, 1500));
      const v = await page.evaluate<PageView>(READ_PAGE);
      return v.totals.sum !== first.totals.sum && v.updated !== first.updated ? v : undefined;
    },
    { timeoutMs: 30_000, what: 'the numbers to change' },
  ))!;
  assert.notEqual(second.totals.sum, first.totals.sum, 'record count of `sum` moved');
  assert.notEqual(second.updated, first.updated, 'the page polled again');

  mkdirSync(dirname(SCREENSHOT), { recursive: true });
  const png = await page.screenshot();
  assert.ok(png.length > 10_000 && png.subarray(1, 4).toString() === 'PNG', 'a PNG screenshot');
  writeFileSync(SCREENSHOT, png);
});
