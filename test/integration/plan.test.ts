import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { brokers, eventually, jobTopics, produce, readAll } from '../helpers/kafka.js';
import { allTasksRunning, jobPath, SLUICE_BIN, spawnWorker, workerGroup } from '../helpers/workers.js';

/** Runs the CLI to its end against the test broker. */
function sluice(args: string[], env: Record<string, string>) {
  const r = spawnSync(process.execPath, [SLUICE_BIN, ...args], {
    encoding: 'utf8',
    env: { ...process.env, KAFKA_BROKERS: brokers().join(','), ...env },
    timeout: 60_000,
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

async function untilRunning(w: ReturnType<typeof spawnWorker>): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (await allTasksRunning(w).catch(() => false)) return;
    if (w.child.exitCode !== null)
      throw new Error(`worker exited ${w.child.exitCode}:\n${w.logs.slice(-20).join('\n')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('worker not running after 30 s');
}

test('sluice plan and the worker should refuse a renamed store, a changed key serde and an unnamed operator', async (t) => {
  const topics = await jobTopics('plan', 2);
  const g = workerGroup(t, topics.id);
  const v1 = { ...topics.env, TEST_PLAN: 'v1' };
  const v2 = { ...topics.env, TEST_PLAN: 'v2' };
  const job = jobPath('running-sum');

  await g.step('run v1 until it processed a few records, then stop it', async () => {
    const records = [0, 1, 2, 3].map((seq) => ({
      key: `k${seq % 2}`,
      value: JSON.stringify({ k: `k${seq % 2}`, v: 1, seq }),
    }));
    await produce(topics.input, records);
    const w = g.add(spawnWorker('running-sum', { name: 'v1', env: v1, args: ['--leave-group-on-stop'] }));
    await untilRunning(w);
    // Each record makes a sum and a tally: 8 outputs once the checkpoint committed them.
    await eventually(
      async () =>
        (await readAll(topics.output, { expected: 8, timeoutMs: 20_000, settleMs: 200 })).length >= 8,
      {
        timeoutMs: 30_000,
        what: 'v1 output',
      },
    );
    assert.equal(await w.kill('SIGTERM'), 0);
    assert.ok(
      w.logs.some((l) => l.includes('topology recorded')),
      'v1 recorded its topology',
    );
  });

  await g.step('plan v1: safe', async () => {
    const r = sluice(['plan', job], v1);
    assert.equal(r.code, 0, `${r.out}${r.err}`);
    assert.match(r.out, /recorded: \d{4}-/);
    assert.match(r.out, /committed offsets: \d+ partitions of /);
    assert.match(r.out, /orphaned internal topics: none/);
    assert.match(r.out, /Safe: no change orphans or corrupts state/);
  });

  await g.step('plan v2: each change reported, exit 1', async () => {
    const r = sluice(['plan', job], v2);
    assert.equal(r.code, 1, `${r.out}${r.err}`);
    assert.match(r.out, /store tally-agg is gone \(renamed to tally2-agg or count-\d+-agg\?\)/);
    assert.match(r.out, /store sum-acc: key serde changed from string to json/);
    assert.match(r.out, /operator count-\d+ has a generated name/);
    assert.match(r.out, /orphaned internal topics: \S+-tally-agg-changelog/);
  });

  await g.step('plan usage error: exit 2', async () => {
    assert.equal(sluice(['plan'], v1).code, 2);
  });

  await g.step('a worker of v2 refuses to start', async () => {
    const w = g.add(spawnWorker('running-sum', { name: 'v2', env: v2 }));
    const code = await w.exited;
    assert.notEqual(code, 0);
    const text = w.logs.join('\n');
    assert.match(text, /SLUICE_STATE_CHANGE/);
    assert.match(text, /store tally-\S+ is gone/);
    assert.match(text, /store sum-acc: key serde changed/);
  });

  await g.step('with --allow-state-change it starts, and records v2', async () => {
    const w = g.add(
      spawnWorker('running-sum', {
        name: 'v2-allowed',
        env: v2,
        args: ['--allow-state-change', '--leave-group-on-stop'],
      }),
    );
    await untilRunning(w);
    assert.ok(w.logs.some((l) => l.includes('state change allowed')));
    assert.equal(await w.kill('SIGTERM'), 0);
    const r = sluice(['plan', job], v2);
    // Recorded now: only the generated name is left.
    assert.equal(r.code, 1, r.out);
    assert.doesNotMatch(r.out, /is gone|serde changed/);
    assert.match(r.out, /generated name/);
  });
});
