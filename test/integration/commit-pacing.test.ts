import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
import {
  createTopics,
  deleteTopicsMatching,
  eventually,
  readAll,
  testKafka,
  uniqueName,
} from '../helpers/kafka.js';
import { allTasksRunning, metricSum, spawnWorker } from '../helpers/workers.js';

/**
 * A worker process under exactly-once (the default) fed a trickle: a record every 5 ms into one
 * partition, so its event loop is mostly idle. How many checkpoints it makes, read from its own
 * /metrics over the middle of the feed, and whether a read_committed reader sees every output once.
 * A process of its own: the test's producer and reader do not load the worker's event loop.
 */
async function trickle(t: TestContext, args: string[]): Promise<{ count: number; ms: number }> {
  const id = uniqueName('t-pace');
  const input = `${id}-in`;
  const output = `${id}-out`;
  t.after(() => deleteTopicsMatching(id));
  await createTopics([
    { topic: input, partitions: 1 },
    { topic: output, partitions: 1 },
  ]);
  const worker = spawnWorker('stateless', {
    env: { TEST_APP_ID: id, TEST_INPUT: input, TEST_OUTPUT: output },
    args,
  });
  t.after(() => worker.kill('SIGKILL'));
  const checkpoints = async () => metricSum(await worker.metrics(), 'sluice_checkpoints_total');
  try {
    await eventually(() => allTasksRunning(worker, 1), { timeoutMs: 60_000, what: 'the task running' });
    const p = testKafka().producer({ idempotent: true, maxInFlightRequests: 1 });
    await p.connect();
    const total = 600;
    let [c0, t0, c1, t1] = [0, 0, 0, 0];
    try {
      for (let i = 0; i < total; i++) {
        const value = JSON.stringify({ k: `k${i % 7}`, seq: i });
        await p.send({ topic: input, acks: -1, messages: [{ key: `k${i % 7}`, value }] });
        await new Promise((r) => setTimeout(r, 5));
        if (i === 150) [c0, t0] = [await checkpoints(), Date.now()];
        if (i === 450) [c1, t1] = [await checkpoints(), Date.now()];
      }
    } finally {
      await p.disconnect();
    }
    const count = c1 - c0;
    const ms = t1 - t0;
    t.diagnostic(`${count} checkpoints in ${ms} ms: ${((count * 1000) / ms).toFixed(1)} per second`);
    const out = await readAll(output, { expected: total, timeoutMs: 30_000, settleMs: 500 });
    assert.deepEqual(
      out.map((r) => JSON.parse(r.value!).seq).sort((a, b) => a - b),
      Array.from({ length: total }, (_, i) => i),
      'every output once, read_committed',
    );
    return { count, ms };
  } catch (e) {
    console.error(worker.logs.slice(-30).join('\n'));
    throw e;
  }
}

test('exactly-once: a worker with time to spare commits more often than the 100 ms interval', {
  timeout: 120_000,
}, async (t) => {
  const { count, ms } = await trickle(t, []);
  // The interval alone allows one per 100 ms (+1 at the window's edges); an idle loop gives a
  // spacing near minCommitIntervalMs (20 ms), one busy 65 % of the time 65 ms.
  assert.ok(count > ms / 65 + 1, `${count} checkpoints in ${ms} ms: more than one per 100 ms`);
});

test('exactly-once: minCommitIntervalMs at the interval commits on the interval only, as Kafka Streams', {
  timeout: 120_000,
}, async (t) => {
  const { count, ms } = await trickle(t, ['--processing.minCommitIntervalMs', '100']);
  // Completions are counted: their starts are 100 ms apart or more, but a slow one (up to ~100 ms on
  // a loaded machine) brings its completion nearer the next. Still under the paced run's bound.
  assert.ok(count <= (ms + 200) / 100 + 1, `${count} checkpoints in ${ms} ms: at most one per 100 ms`);
});
