import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { json, string, valueState } from 'sluice';
import { deleteTopicsMatching, jobTopics, produce, readAll, withAdmin } from '../helpers/kafka.js';
import { inProcessApp, jobPath, SLUICE_BIN, spawnWorker } from '../helpers/workers.js';

interface In {
  k: string;
  proc?: boolean;
}

test('timers should fire on event time when the watermark passes them and on processing time by the clock', {
  timeout: 120_000,
}, async (t) => {
  const { input, output, app, start } = await inProcessApp(t, 't-timers', 1);
  app
    .stream(input, { key: string(), value: json<In>() })
    .keyBy((r) => r.k, { name: 'by-k' })
    .process(
      {
        state: { seen: valueState<number>() },
        onRecord(r, ctx) {
          ctx.state.seen.set((ctx.state.seen.get() ?? 0) + 1);
          if (r.proc) ctx.timers.atProcessingTime(Date.now() + 300);
          else ctx.timers.atEventTime(ctx.timestamp + 1000);
        },
        onTimer(ts, ctx) {
          ctx.emit({ k: ctx.key, ts, domain: ctx.domain, seen: ctx.state.seen.get() ?? 0 });
          ctx.state.seen.clear();
        },
      },
      { name: 'timed' },
    )
    .to(output);
  await start('warn');
  const rec = (k: string, ts: number, proc = false) => ({
    key: k,
    value: JSON.stringify({ k, proc }),
    timestamp: String(ts),
  });
  // a registers 2000 and 2500, b 2200; nothing passes the watermark (1500) yet.
  await produce(input, [rec('a', 1000), rec('b', 1200), rec('a', 1500)]);
  const none = await readAll(output, { timeoutMs: 4000, settleMs: 1000 });
  assert.equal(none.length, 0, 'no event-time timer fires before the watermark passes it');
  // c at 5000 moves the watermark past all three; c's own timer (6000) stays pending.
  await produce(input, [rec('c', 5000)]);
  const fired = await readAll(output, { expected: 3 });
  assert.deepEqual(
    fired.map((r) => JSON.parse(r.value!)),
    [
      { k: 'a', ts: 2000, domain: 'event', seen: 2 },
      { k: 'b', ts: 2200, domain: 'event', seen: 1 },
      { k: 'a', ts: 2500, domain: 'event', seen: 0 },
    ],
    'due timers fire once each, in time order, with their key in scope',
  );
  // A processing-time timer fires by the clock, with no further input.
  await produce(input, [rec('p', 5000, true)]);
  const all = await readAll(output, { expected: 4 });
  const p = JSON.parse(all[3]!.value!);
  assert.deepEqual([p.k, p.domain, p.seen], ['p', 'processing', 1]);
});

test('sluice reset should ask for --yes, then delete the group offsets, internal topics and local state', {
  timeout: 120_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-reset', 2);
  t.after(() => deleteTopicsMatching(id));
  const stateDir = mkdtempSync(join(tmpdir(), 'sluice-reset-'));
  const w = spawnWorker('running-sum', { env, stateDir });
  t.after(() => w.kill('SIGKILL'));
  await produce(
    input,
    Array.from({ length: 100 }, (_, i) => ({
      key: `k${i % 5}`,
      value: JSON.stringify({ k: `k${i % 5}`, v: 1, seq: i }),
    })),
  );
  await readAll(output, { expected: 100 });
  assert.equal(await w.kill('SIGTERM'), 0);
  const internal = [`${id}-by-k-repartition`, `${id}-sum-acc-changelog`];
  assert.ok(existsSync(join(stateDir, id)), 'local state exists before the reset');

  const run = (...extra: string[]) =>
    spawnSync(
      process.execPath,
      [SLUICE_BIN, 'reset', jobPath('running-sum'), '--state-dir', stateDir, ...extra],
      {
        encoding: 'utf8',
        env: { ...process.env, ...env },
      },
    );
  const dry = run();
  assert.equal(dry.status, 2, 'without --yes nothing is deleted');
  for (const topic of internal) assert.match(dry.stdout, new RegExp(topic));
  assert.ok(existsSync(join(stateDir, id)));

  const done = run('--yes');
  assert.equal(done.status, 0, done.stderr);
  assert.ok(!existsSync(join(stateDir, id)), 'local state deleted');
  await withAdmin(async (admin) => {
    const topics = await admin.listTopics();
    for (const topic of internal) assert.ok(!topics.includes(topic), `${topic} deleted`);
    assert.ok(topics.includes(input) && topics.includes(output), 'input and output topics kept');
    const offsets = await admin.fetchOffsets({ groupId: id, topics: [input] });
    assert.ok(
      offsets[0]!.partitions.every((p) => p.offset === '-1'),
      'committed offsets deleted',
    );
  });
});
