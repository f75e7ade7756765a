import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventually, jobTopics, produce, readAll } from '../helpers/kafka.js';
import { assertExactRunningSums, RunningSumInput } from '../helpers/running-sum.js';
import {
  allTasksRunning,
  metricSum,
  spawnWorker,
  type WorkerProcess,
  workerGroup,
} from '../helpers/workers.js';

const PARTITIONS = 4;
/** Two sub-topologies (source → repartition, repartition → state): one task per partition each. */
const TASKS = 2 * PARTITIONS;

async function restored(w: WorkerProcess): Promise<number> {
  return metricSum(await w.metrics(), 'sluice_restore_records_total');
}

/** The ids of the stateful tasks (sub-topology 1, the running sum) a worker owns. */
async function statefulTasks(w: WorkerProcess): Promise<string[]> {
  const s = await w.status();
  return s.tasks.map((t: any) => t.id as string).filter((id: string) => id.startsWith('1_'));
}

test('scaling from 1 to 3 workers and back to 1 should move state with its partitions and keep results exact', {
  timeout: 420_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-scale', PARTITIONS);
  const group = workerGroup(t, id);
  // b and c are stopped for good (scale-down): as static members they leave the group on SIGTERM
  // only when told to, else their tasks would wait out the session timeout.
  const start = (name: string, args: string[] = []) =>
    group.add(spawnWorker('running-sum', { name, env, args }));
  const step = group.step;
  const data = new RunningSumInput({ seed: 5, keys: 50 });
  const a = start('a');
  await step('produce 10k', () => produce(input, data.next(10_000)));
  // Scale out only once a owns every task and has written output, so that b and c must take
  // over state that exists (spawned together with a, they would just split empty tasks).
  await step('a owns every task', () =>
    eventually(() => allTasksRunning(a, TASKS), { what: 'a owns every task' }),
  );
  await step('a wrote the output', () => readAll(output, { expected: data.count }));
  assert.equal((await statefulTasks(a)).length, PARTITIONS);
  const restoredA = await restored(a);

  const b = start('b', ['--leave-group-on-stop']);
  const c = start('c', ['--leave-group-on-stop']);
  await step('produce 10k more', () => produce(input, data.next(10_000), 1000));
  await step('b and c own tasks', () =>
    eventually(async () => (await allTasksRunning(b)) && (await allTasksRunning(c)), {
      what: 'b and c own tasks',
    }),
  );
  // Each sub-topology is balanced on its own, so b and c each own a stateful task, moved from a
  // with its state: restored from the changelog, since their state dirs are empty.
  for (const w of [b, c]) {
    const tasks = await statefulTasks(w);
    assert.ok(tasks.length > 0, `${w.name} owns a stateful task`);
    const n = await restored(w);
    t.diagnostic(`${w.name} restored ${n} changelog records for ${tasks.join(', ')}`);
    assert.ok(n > 0, `${w.name} restored the state of the tasks it took over (${n} records)`);
  }
  await step('produce 10k more', () => produce(input, data.next(10_000), 1000));
  // Stopped workers leave the group (--leave-group-on-stop; or forced by the 30 s shutdown deadline).
  await step('stop b', () => b.kill('SIGTERM'));
  await step('produce 5k more', () => produce(input, data.next(5000), 1000));
  await step('stop c', () => c.kill('SIGTERM'));
  await step('produce 5k more', () => produce(input, data.next(5000), 1000));
  await step('a owns every task', () =>
    eventually(() => allTasksRunning(a, TASKS), { what: 'a owns every task again', timeoutMs: 120_000 }),
  );
  // The tasks came back with what b and c added to their state: a replays it.
  const back = (await restored(a)) - restoredA;
  t.diagnostic(`a restored ${back} changelog records taking its tasks back`);
  assert.ok(back > 0, `a caught up on the state b and c wrote (${back} records)`);
  const out = await step('read the output', () =>
    readAll(output, { expected: data.count, timeoutMs: 120_000 }),
  );
  assertExactRunningSums(out, data.expected);
});
