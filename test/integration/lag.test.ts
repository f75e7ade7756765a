/**
 * Lag counts records, not transaction markers: an input written in transactions (as every
 * exactly-once Sluice job writes its outputs) ends each one with a commit marker, which the
 * consumer never sees as a record. A worker that has read everything must report lag 0, not one
 * per marker at the end of the log (issue 16: "idle lag reads 18"). Its first /status read also
 * shows the group, not an empty one.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createTopics, deleteTopicsMatching, eventually, testKafka, uniqueName } from '../helpers/kafka.js';
import { metricSum, metricValue, spawnWorker } from '../helpers/workers.js';

test('an idle worker should report lag 0 on an input that ends with commit markers', {
  timeout: 120_000,
}, async (t) => {
  const id = uniqueName('t-lag');
  const input = `${id}-in`;
  t.after(() => deleteTopicsMatching(id));
  await createTopics([
    { topic: input, partitions: 2 },
    { topic: `${id}-out`, partitions: 2 },
  ]);
  const p = testKafka().producer({ transactionalId: `${id}-tx`, idempotent: true, maxInFlightRequests: 1 });
  await p.connect();
  try {
    for (let i = 0; i < 6; i++) {
      const tx = await p.transaction();
      await tx.send({
        topic: input,
        messages: [{ key: `k${i}`, value: JSON.stringify({ k: `k${i}`, seq: i }), partition: i % 2 }],
      });
      await tx.commit();
    }
  } finally {
    await p.disconnect();
  }
  const worker = spawnWorker('stateless', {
    env: { TEST_APP_ID: id, TEST_INPUT: input, TEST_OUTPUT: `${id}-out` },
  });
  t.after(() => worker.kill('SIGKILL'));
  try {
    await eventually(
      async () => metricSum(await worker.metrics(), 'sluice_records_in_total', { topic: input }) === 6,
      {
        timeoutMs: 90_000,
        what: 'all 6 records read',
      },
    );
    // Each partition: 3 records and 3 markers; the high watermark is 6, the last record at 4.
    await eventually(
      async () => {
        const m = await worker.metrics();
        return [0, 1].every(
          (partition) =>
            metricValue(m, 'sluice_consumer_lag', { topic: input, partition: String(partition) }) === 0,
        );
      },
      { timeoutMs: 20_000, what: 'lag 0 on both partitions' },
    );
    // The first /status read waits for the group's first DescribeGroups (it showed no member).
    const status = await worker.status();
    assert.equal(status.group.members.length, 1, JSON.stringify(status.group));
    assert.equal(status.group.members[0].self, true);
    const lags = status.tasks.map((x: { lag: Record<string, number | null> }) => x.lag[input]);
    assert.deepEqual(lags, [0, 0], JSON.stringify(status.tasks));
  } catch (e) {
    console.error(worker.logs.slice(-30).join('\n'));
    throw e;
  }
});
