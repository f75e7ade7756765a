import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deleteTopicsMatching, jobTopics, produce, readAll, withAdmin } from '../helpers/kafka.js';
import { spawnWorker } from '../helpers/workers.js';

const inputs = (from: number, to: number) =>
  Array.from({ length: to - from }, (_, i) => ({
    key: `k${from + i}`,
    value: JSON.stringify({ k: `k${from + i}`, seq: from + i }),
  }));

/**
 * A task's position that retention deleted: the group's committed offset is below the log's
 * start, so kafkajs answers the fetch from the log's start, beyond the position the task sought.
 * The consumer drops a batch fetched from beyond its partition's position (fetch-positions.ts),
 * so kafkajs's reset must be told to it (kafkajs-fetch-guard.ts): the worker goes on from the
 * log's start, every record once, without dropping a batch or logging a gap.
 */
test('a worker whose committed offset retention deleted should go on from the log start, every record once', {
  timeout: 90_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-fetch-position', 1);
  await produce(input, inputs(0, 10));
  await withAdmin(async (a) => {
    await a.setOffsets({ groupId: id, topic: input, partitions: [{ partition: 0, offset: '3' }] });
    await a.deleteTopicRecords({ topic: input, partitions: [{ partition: 0, offset: '6' }] });
  });
  const w = spawnWorker('stateless', {
    env,
    args: ['--log-level', 'warn', '--processing.guarantee', 'exactly_once'],
  });
  t.after(async () => {
    await w.kill();
    await deleteTopicsMatching(id);
  });
  const seqs = async (n: number) =>
    (await readAll(output, { expected: n, timeoutMs: 60_000 })).map((r) => JSON.parse(r.value!).seq);
  assert.deepEqual(await seqs(4), [6, 7, 8, 9]);
  // And it keeps going: a record written now comes out once.
  await produce(input, inputs(10, 11));
  assert.deepEqual(await seqs(5), [6, 7, 8, 9, 10]);
  const said = (text: string) => w.logs.filter((l) => l.includes(text)).length;
  assert.ok(said('Offset out of range') >= 1, "kafkajs moved the position to the log's start");
  assert.equal(said("beyond the partition's position"), 0, 'no batch dropped, no gap taken');
});
