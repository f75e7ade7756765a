import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readCommittedWithJava } from '../../bench/java-reader.js';
import { KafkaClient } from '../../src/kafka/client.js';
import { RestoreIncompleteError } from '../../src/kafka/partition-reader.js';
import { createLogger } from '../../src/ops/logger.js';
import {
  brokers,
  createTopics,
  deleteTopicsMatching,
  eventually,
  jobTopics,
  produce,
  testKafka,
  uniqueName,
} from '../helpers/kafka.js';
import { allTasksRunning, spawnWorker, workerGroup } from '../helpers/workers.js';

const quiet = () => createLogger({ level: 'silent', format: 'json' });
const client = (name: string) =>
  new KafkaClient(
    {
      brokers: brokers(),
      clientId: name,
      requestTimeoutMs: 30_000,
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1000,
    },
    quiet(),
  );

test('a live old owner with an open transaction cannot commit once the new owner has begun to restore', {
  timeout: 120_000,
}, async (t) => {
  // The old owner of task 1_0 of the running-sum job: a producer with the task's transactional
  // id, a transaction open with a record in the output topic.
  const { id, input, output, env } = await jobTopics('t-fence', 1);
  const group = workerGroup(t, id);
  const old = testKafka().producer({
    transactionalId: `${id}-1_0`,
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await old.connect();
  t.after(() => old.disconnect().catch(() => undefined));
  const tx = await old.transaction();
  await tx.send({
    topic: output,
    messages: [{ key: 'zombie', value: JSON.stringify({ k: 'zombie', sum: -1, n: -1, seq: -1 }) }],
  });

  // The new owner: a worker given the task. Its init must fence before it restores.
  const args = ['--processing.transactions', 'task', '--log-level', 'info'];
  const w = group.add(spawnWorker('running-sum', { name: 'new-owner', env, args }));
  await group.step('the new owner runs its tasks', () =>
    eventually(() => allTasksRunning(w, 2), { timeoutMs: 60_000, what: 'tasks running' }),
  );
  // Its restore has begun (and ended): the old owner's commit must be refused now.
  await assert.rejects(tx.commit(), 'the old owner commits after the new owner restored');
  await produce(input, [{ key: 'a', value: JSON.stringify({ k: 'a', v: 1, seq: 0 }) }]);
  const out = await group.step('the new owner commits its output', async () => {
    for (;;) {
      const got = await readCommittedWithJava(brokers().join(','), output, { withValues: true });
      if (got.length > 0) return got;
    }
  });
  assert.deepEqual(
    out.map((r) => JSON.parse(r.value).k),
    ['a'],
    "the output holds the new owner's record and nothing of the old owner",
  );
});

test('a restore that cannot reach the end offset fails instead of completing', {
  timeout: 60_000,
}, async (t) => {
  // A partition whose last stable offset stays below its end: a foreign transaction left open.
  const topic = uniqueName('t-restore-stall');
  await createTopics([{ topic, partitions: 1 }]);
  t.after(() => deleteTopicsMatching(topic));
  await produce(topic, [
    { key: 'a', value: '1' },
    { key: 'b', value: '2' },
  ]);
  const p = testKafka().producer({
    transactionalId: uniqueName('t-open'),
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await p.connect();
  t.after(async () => {
    await tx.abort().catch(() => undefined);
    await p.disconnect();
  });
  const tx = await p.transaction();
  await tx.send({ topic, messages: [{ key: 'c', value: '3' }] });
  const c = client('restore-stall');
  t.after(() => c.close());
  const reader = c.partitionReader();
  t.after(() => reader.close());
  const { high } = await reader.endOffsets(topic, 0);
  assert.equal(high, 3n, 'the end offset counts the open transaction');
  let delivered = 0;
  await assert.rejects(
    reader.read({
      topic,
      partition: 0,
      from: 0n,
      to: high,
      stallTimeoutMs: 2000,
      onRecords: (r) => {
        delivered += r.length;
      },
    }),
    (e: unknown) => e instanceof RestoreIncompleteError && /stopped at 2/.test(e.message),
  );
  assert.equal(delivered, 2, 'the committed records before the open transaction were read');
});
