import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { arrivalClock, eventually, jobTopics, produce, type TestRecord } from '../helpers/kafka.js';
import { spawnWorker, workerGroup } from '../helpers/workers.js';

/**
 * A crash costs seconds, not a session timeout: a worker holding TEST_RESTART_KEYS keys of state
 * (default 1e6) is SIGKILLed and restarted at once on its own folder, with default settings. As
 * the same static member (its group.instance.id is kept in the folder) it gets its tasks back
 * without a rebalance, fences, replays at most one checkpoint of changelog, and goes on. The time
 * from its spawn to its first new committed output is measured (the target is 3 s; asserted at
 * 10 s to absorb a loaded machine).
 */
const KEYS = Number(process.env.TEST_RESTART_KEYS ?? 1_000_000);
const PARTITIONS = 4;

/** One record per key `k<i>`, value {k, v: 1, seq}. */
function records(from: number, n: number, keyOf: (i: number) => number): TestRecord[] {
  const out: TestRecord[] = [];
  for (let i = from; i < from + n; i++) {
    const k = `k${keyOf(i)}`;
    out.push({ key: k, value: JSON.stringify({ k, v: 1, seq: i }) });
  }
  return out;
}

test(`a worker SIGKILLed with ${KEYS} keys of state should resume output within seconds of its restart`, {
  timeout: 600_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-restart', PARTITIONS);
  const group = workerGroup(t, id);
  const dir = mkdtempSync(join(tmpdir(), 'sluice-restart-'));
  const start = (name: string) => group.add(spawnWorker('running-sum', { name, stateDir: dir, env }));
  const clock = await arrivalClock(output);
  t.after(() => clock.stop());

  let w = start('w1');
  await group.step(`produce ${KEYS} keys`, () =>
    // Four producers at once, each a quarter of the keys (the worker processes meanwhile).
    Promise.all(
      [0, 1, 2, 3].map(async (q) => {
        const from = Math.floor((KEYS * q) / 4);
        const to = Math.floor((KEYS * (q + 1)) / 4);
        for (let i = from; i < to; i += 50_000)
          await produce(
            input,
            records(i, Math.min(50_000, to - i), (x) => x),
            10_000,
          );
      }),
    ),
  );
  await group.step(`${KEYS} outputs committed`, () =>
    eventually(() => clock.arrived.size >= KEYS, {
      what: 'every key processed',
      timeoutMs: 420_000,
      intervalMs: 500,
    }),
  );

  await group.step('SIGKILL', () => w.kill('SIGKILL'));
  // New input for keys spread over every partition: its outputs can only come from the restart.
  const fresh = records(KEYS, 200, (i) => (i * 7919) % KEYS);
  await produce(input, fresh);
  w = start('w2');
  const spawned = Date.now();
  await group.step('the restarted worker outputs the new records', () =>
    eventually(() => fresh.every((_, j) => clock.arrived.has(KEYS + j)), {
      what: 'outputs of the records produced after the kill',
      timeoutMs: 120_000,
      intervalMs: 20,
    }),
  );
  const firstMs = Math.min(...fresh.map((_, j) => clock.arrived.get(KEYS + j)!)) - spawned;
  const lastMs = Math.max(...fresh.map((_, j) => clock.arrived.get(KEYS + j)!)) - spawned;
  t.diagnostic(
    `restart with ${KEYS} keys: spawn → first new committed output ${firstMs} ms, all 200 in ${lastMs} ms`,
  );
  if (firstMs > 10_000) console.error(`--- w2 ---\n${w.logs.slice(0, 80).join('\n')}`);
  assert.ok(
    firstMs <= 10_000,
    `first new output ${firstMs} ms after the restart's spawn (target 3 s, limit 10 s)`,
  );
  assert.ok(
    !w.logs.some((l) => l.includes('restoring state from changelog') && /"toReplay":\d{6,}/.test(l)),
    'the restart replays at most a checkpoint, never the whole changelog',
  );
});
