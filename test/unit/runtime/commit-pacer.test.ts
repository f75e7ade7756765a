import assert from 'node:assert/strict';
import { test } from 'node:test';
import { configSchema } from '../../../src/config/schema.js';
import { CommitPacer } from '../../../src/runtime/commit-pacer.js';

const processing = (p: Record<string, unknown> = {}) =>
  configSchema.parse({ kafka: { brokers: ['127.0.0.1:9092'] }, processing: p }).processing;

const task = (sinceCheckpoint: number) => ({ sinceCheckpoint });

/** The event loop idle (waiting on a timer) or busy (spinning) for `ms`, then the pacer's tick; `n` times. */
async function ticks(pacer: CommitPacer, mode: 'idle' | 'busy', n = 6, ms = 30): Promise<void> {
  for (let i = 0; i < n; i++) {
    if (mode === 'idle') await new Promise((r) => setTimeout(r, ms));
    else for (const end = performance.now() + ms; performance.now() < end; );
    pacer.tick();
  }
}

test('CommitPacer: a commit interval since the last checkpoint is always due; before any tick, only that', () => {
  const pacer = new CommitPacer(processing(), new Map());
  assert.equal(pacer.due(task(100)), true);
  assert.equal(pacer.due(task(99)), false, 'caught up, but the busy share is 1 until measured');
  assert.equal(pacer.spacing, 100);
  const behind = new CommitPacer(processing(), new Map([['in:0', 500]]));
  assert.equal(behind.due(task(100)), true, 'behind: the interval still');
});

test('CommitPacer: an idle exactly-once worker commits early, spaced worker-wide, unless a partition is behind', async () => {
  const lag = new Map([
    ['in:0', 0],
    ['other:0', 0],
    ['in:1', 0],
  ]);
  const pacer = new CommitPacer(processing(), lag);
  await ticks(pacer, 'idle');
  assert.ok(pacer.spacing < 40, `spacing ${pacer.spacing} near the 20 ms minimum when idle`);
  assert.ok(pacer.spacing >= 20, 'never under processing.minCommitIntervalMs');
  assert.equal(pacer.due(task(10)), false, 'under the spacing: not yet');
  assert.equal(pacer.due(task(45)), true, 'every partition caught up: due early');
  assert.equal(pacer.due(task(45)), false, "another task right after: the worker's last early commit counts");
  assert.equal(pacer.due(task(100)), true, 'the interval is always due');
  await new Promise((r) => setTimeout(r, 45));
  lag.set('other:1', 3);
  assert.equal(pacer.due(task(45)), false, 'one partition of the worker behind: the interval');
  lag.set('other:1', 0);
  assert.equal(pacer.due(task(45)), true);
});

test('CommitPacer: a busy worker goes back to the interval', async () => {
  const pacer = new CommitPacer(processing(), new Map());
  await ticks(pacer, 'idle');
  assert.ok(pacer.spacing < 40);
  await ticks(pacer, 'busy', 10);
  assert.ok(pacer.spacing > 90, `spacing ${pacer.spacing} back near the interval when saturated`);
  assert.equal(pacer.due(task(60)), false);
});

test('CommitPacer: never sooner than a fifth of a long interval', async () => {
  const pacer = new CommitPacer(processing({ commitIntervalMs: 30_000 }), new Map());
  await ticks(pacer, 'idle');
  assert.equal(pacer.spacing, 6_000);
  assert.equal(pacer.due(task(5_999)), false);
  assert.equal(pacer.due(task(6_000)), true);
});

test('CommitPacer: at-least-once, a transaction per task, or minCommitIntervalMs at the interval: the interval only', async () => {
  const off = [
    { guarantee: 'at_least_once' },
    { transactions: 'task' },
    { minCommitIntervalMs: 100 },
    { commitIntervalMs: 10 },
  ];
  for (const p of off as Array<Record<string, unknown> & { commitIntervalMs?: number }>) {
    const pacer = new CommitPacer(processing(p), new Map());
    await ticks(pacer, 'idle', 3);
    const interval = p.commitIntervalMs ?? 100;
    assert.equal(pacer.spacing, interval, JSON.stringify(p));
    assert.equal(pacer.due(task(interval - 1)), false, JSON.stringify(p));
    assert.equal(pacer.due(task(interval)), true, JSON.stringify(p));
  }
  assert.equal(new CommitPacer(processing({ commitIntervalMs: 4 }), new Map()).tickMs, 10);
  assert.equal(new CommitPacer(processing({ commitIntervalMs: 300 }), new Map()).tickMs, 150);
});

test('processing.minCommitIntervalMs defaults to 20 and is checked at start', () => {
  assert.equal(processing().minCommitIntervalMs, 20);
  assert.throws(() => processing({ minCommitIntervalMs: 0 }));
});
