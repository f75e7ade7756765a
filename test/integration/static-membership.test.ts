import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { partitionForKey } from '../../src/kafka/partitioner.js';
import { arrivalClock, brokers, eventually, jobTopics, produce, readAll } from '../helpers/kafka.js';
import { assertExactRunningSums, RunningSumInput } from '../helpers/running-sum.js';
import {
  allTasksRunning,
  jobPath,
  SLUICE_BIN,
  spawnWorker,
  type WorkerProcess,
  workerGroup,
} from '../helpers/workers.js';

const PARTITIONS = 4;
/** Two sub-topologies (source → repartition, repartition → running sum): one task per partition each. */
const TASKS = 2 * PARTITIONS;

const taskIds = async (w: WorkerProcess): Promise<string[]> =>
  ((await w.status()).tasks as Array<{ id: string }>).map((t) => t.id).sort();

/** The worker's logged assignments (one per rebalance it took part in). */
const assignments = (w: WorkerProcess): string[][] =>
  w.logs.flatMap((l) => {
    try {
      const o = JSON.parse(l);
      return o.msg === 'assignment' ? [o.tasks as string[]] : [];
    } catch {
      return [];
    }
  });

/** The group.instance.id the worker logged at start, and where it came from. */
const instanceOf = (w: WorkerProcess): { groupInstanceId: string; source: string } | undefined =>
  w.logs
    .map((l) => {
      try {
        return JSON.parse(l);
      } catch {
        return undefined;
      }
    })
    .filter((o) => o?.groupInstanceId !== undefined && o.source !== undefined)
    .map((o) => ({ groupInstanceId: o.groupInstanceId as string, source: o.source as string }))[0];

/** Whether these workers together run every task, each exactly once. */
async function ownAll(ws: WorkerProcess[]): Promise<boolean> {
  const all: string[] = [];
  for (const w of ws) {
    if (!(await allTasksRunning(w))) return false;
    all.push(...(await taskIds(w)));
  }
  return all.length === TASKS && new Set(all).size === TASKS;
}

test('static members should restart without a rebalance, and a removed one should hand its tasks over at once', {
  timeout: 420_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-static', PARTITIONS);
  const group = workerGroup(t, id);
  const step = group.step;
  const dirs = { a: '', b: '', c: '' } as Record<string, string>;
  for (const n of Object.keys(dirs)) dirs[n] = mkdtempSync(join(tmpdir(), `sluice-static-${n}-`));
  const start = (name: string, dir: string, extra: Record<string, string> = {}) =>
    group.add(spawnWorker('running-sum', { name, stateDir: dir, env: { ...env, ...extra } }));
  const data = new RunningSumInput({ seed: 12, keys: 60 });

  const a = start('a', dirs.a!);
  const b = start('b', dirs.b!);
  let c = start('c', dirs.c!);
  await step('produce 3000', () => produce(input, data.next(3000), 1000));
  await step('a, b and c run every task', () =>
    eventually(() => ownAll([a, b, c]), { what: 'every task running on a, b and c', timeoutMs: 120_000 }),
  );
  await step('read 3000 outputs', () => readAll(output, { expected: data.count }));
  const idC = instanceOf(c);
  assert.equal(idC?.source, 'created', 'c made its instance id');
  assert.equal(readFileSync(join(dirs.c!, id, 'instance-id'), 'utf8').trim(), idC?.groupInstanceId);
  const before = { a: await taskIds(a), b: await taskIds(b), c: await taskIds(c) };
  const seen = { a: assignments(a).length, b: assignments(b).length };
  t.diagnostic(`tasks: ${JSON.stringify(before)}`);

  // (a) SIGTERM and restart on the same folder: the same member, its tasks back, nobody else moves.
  assert.equal(await step('SIGTERM c', () => c.kill('SIGTERM')), 0);
  assert.ok(
    c.logs.some((l) => l.includes('static member stopping without leaving the group')),
    'c did not leave the group',
  );
  c = start('c2', dirs.c!);
  const t0 = Date.now();
  await step('c2 runs its tasks', () =>
    eventually(() => allTasksRunning(c, before.c.length), { what: 'c2 running', timeoutMs: 60_000 }),
  );
  t.diagnostic(`SIGTERM restart: spawn → c2 running its ${before.c.length} tasks in ${Date.now() - t0} ms`);
  assert.deepEqual(instanceOf(c), { ...idC, source: 'file' }, 'c2 read c’s instance id back');
  assert.deepEqual(await taskIds(c), before.c, 'c2 owns exactly c’s tasks');
  await step('produce 1000', () => produce(input, data.next(1000), 1000));
  await step('read 4000 outputs', () => readAll(output, { expected: data.count }));
  assert.deepEqual(await taskIds(a), before.a, 'no task moved on a');
  assert.deepEqual(await taskIds(b), before.b, 'no task moved on b');
  assert.equal(assignments(a).length, seen.a, 'a saw no rebalance');
  assert.equal(assignments(b).length, seen.b, 'b saw no rebalance');

  // (b) SIGKILL and restart at once: spawn → the first committed output that needed c.
  const clock = await step('start the arrival clock', async () => {
    const k = await arrivalClock(output);
    await eventually(() => k.arrived.size >= data.count, { what: 'the clock caught up' });
    return k;
  });
  t.after(() => clock.stop());
  // c's partitions: a record of key k passes tasks 0_q and 1_q, q = murmur2(k) mod 4.
  const mine = new Set(before.c.map((x) => Number(x.split('_')[1])));
  await step('SIGKILL c2', () => c.kill('SIGKILL'));
  const firstSeq = data.count;
  const batch = data.next(1000);
  const viaC = batch
    .map((r) => JSON.parse(String(r.value)).seq as number)
    .filter((_, i) => mine.has(partitionForKey(Buffer.from(batch[i]!.key!), PARTITIONS)));
  assert.ok(viaC.length > 0, 'some records need c’s tasks');
  await step('produce 1000', () => produce(input, batch, 1000));
  c = start('c3', dirs.c!);
  const spawned = Date.now();
  await step('outputs that need c arrive', () =>
    eventually(() => viaC.every((s) => clock.arrived.has(s)), { what: 'c3’s outputs', timeoutMs: 60_000 }),
  );
  const first = Math.min(...viaC.map((s) => clock.arrived.get(s)!)) - spawned;
  // A slow restart says why: the restarted worker's first lines and every worker's assignments.
  if (first > 10_000 || process.env.TEST_DEBUG) {
    console.error(`--- c3 (first output ${first} ms after spawn) ---\n${c.logs.slice(0, 60).join('\n')}`);
    for (const [n, w] of [
      ['a', a],
      ['b', b],
    ] as const)
      console.error(
        `--- ${n} assignments ---\n${assignments(w)
          .map((x) => x.join(' '))
          .join('\n')}`,
      );
  }
  const last = Math.max(...viaC.map((s) => clock.arrived.get(s)!)) - spawned;
  t.diagnostic(
    `SIGKILL restart: spawn → first committed output of c3 ${first} ms, all ${viaC.length} of its outputs ${last} ms`,
  );
  assert.ok(first <= 10_000, `first output ${first} ms after spawn (≤ 10 s)`);
  await step('every record produced after the kill is output', () =>
    eventually(() => [...clock.arrived.keys()].filter((s) => s >= firstSeq).length === batch.length, {
      what: 'all 1000 outputs',
    }),
  );
  assert.deepEqual(await taskIds(c), before.c, 'c3 owns exactly c’s tasks');
  assert.equal(assignments(a).length, seen.a, 'a saw no rebalance');
  assert.equal(assignments(b).length, seen.b, 'b saw no rebalance');

  // (c) Scale-down: c stops for good and is removed by its instance id; a and b take over at once.
  assert.equal(await step('SIGTERM c3', () => c.kill('SIGTERM')), 0);
  const removedAt = Date.now();
  const removeArgs = (instance: string) => [
    SLUICE_BIN,
    'group',
    'remove-member',
    jobPath('running-sum'),
    '--instance-id',
    instance,
  ];
  const cliOpts = {
    env: { ...process.env, ...env, KAFKA_BROKERS: brokers().join(',') },
    encoding: 'utf8' as const,
  };
  const cli = spawnSync(process.execPath, removeArgs(idC!.groupInstanceId), cliOpts);
  assert.equal(cli.status, 0, cli.stderr);
  assert.match(cli.stdout, new RegExp(`removed static member ${idC!.groupInstanceId} from group ${id}`));
  t.diagnostic(`sluice group remove-member: ${cli.stdout.trim()} (${Date.now() - removedAt} ms)`);
  const again = spawnSync(process.execPath, removeArgs(idC!.groupInstanceId), cliOpts);
  assert.equal(again.status, 1, 'an id the group does not have is an error');
  assert.match(again.stderr, /could not remove .*UNKNOWN_MEMBER_ID/);
  await step('a and b run every task', () =>
    eventually(() => ownAll([a, b]), { what: 'a and b own every task', timeoutMs: 60_000 }),
  );
  const handover = Date.now() - removedAt;
  t.diagnostic(`scale-down by remove-member: removal → every task running on a and b in ${handover} ms`);
  assert.ok(handover <= 5000, `tasks running on a and b ${handover} ms after the removal (≤ 5 s)`);

  // (c') Scale-down by the worker itself: --leave-group-on-stop hands its tasks over on SIGTERM.
  const d = group.add(
    spawnWorker('running-sum', {
      name: 'd',
      stateDir: mkdtempSync(join(tmpdir(), 'sluice-static-d-')),
      env,
      args: ['--leave-group-on-stop'],
    }),
  );
  await step('a, b and d run every task', () =>
    eventually(async () => (await ownAll([a, b, d])) && (await taskIds(d)).length > 0, {
      what: 'd owns tasks',
      timeoutMs: 120_000,
    }),
  );
  const stopAt = Date.now();
  assert.equal(await step('SIGTERM d', () => d.kill('SIGTERM')), 0);
  const exitMs = Date.now() - stopAt;
  await step('a and b run every task', () =>
    eventually(() => ownAll([a, b]), { what: 'a and b own every task', timeoutMs: 60_000 }),
  );
  const leaveMs = Date.now() - stopAt;
  t.diagnostic(
    `scale-down by --leave-group-on-stop: SIGTERM → d exited ${exitMs} ms, a and b run every task ${leaveMs} ms`,
  );
  assert.ok(d.logs.some((l) => l.includes('static member leaving the group')));
  assert.ok(
    leaveMs <= 5000 + exitMs,
    `tasks running on a and b ${leaveMs - exitMs} ms after d exited (≤ 5 s)`,
  );

  await step('produce 1000', () => produce(input, data.next(1000), 1000));
  const out = await step('read the output', () =>
    readAll(output, { expected: data.count, timeoutMs: 120_000 }),
  );
  assertExactRunningSums(out, data.expected);
});

test('a worker whose instance id another worker took should fail with SLUICE_FENCED_INSTANCE, not loop', {
  timeout: 180_000,
}, async (t) => {
  const { id, input, env } = await jobTopics('t-fenced', PARTITIONS);
  const group = workerGroup(t, id);
  const same = { ...env, SLUICE_KAFKA_GROUP_INSTANCE_ID: `${id}-dup` };
  const x = group.add(spawnWorker('running-sum', { name: 'x', env: same }));
  await group.step('produce 500', () => produce(input, new RunningSumInput({ seed: 3, keys: 10 }).next(500)));
  await group.step('x runs every task', () =>
    eventually(() => allTasksRunning(x, TASKS), { what: 'x running' }),
  );
  const y = group.add(spawnWorker('running-sum', { name: 'y', env: same }));
  const t0 = Date.now();
  const code = await group.step('x fails', () => x.exited);
  t.diagnostic(`x exited ${Date.now() - t0} ms after y started`);
  assert.equal(code, 1);
  assert.ok(
    x.logs.some((l) => l.includes('SLUICE_FENCED_INSTANCE') && l.includes(`${id}-dup`)),
    'x says why, with the id',
  );
  await group.step('y runs every task', () =>
    eventually(() => allTasksRunning(y, TASKS), { what: 'y running', timeoutMs: 90_000 }),
  );
});
