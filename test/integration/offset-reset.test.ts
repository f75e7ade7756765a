import assert from 'node:assert/strict';
import { test } from 'node:test';
import '../../src/kafka/kafkajs-preload.js';
import { offsetResetPatched } from '../../src/kafka/kafkajs-offset-reset.js';
import { createTopics, produce, testKafka, uniqueName, withAdmin } from '../helpers/kafka.js';

/**
 * A consumer whose position is out of the log's range (here: records deleted below the group's
 * committed offset, as retention does; a leader change can put it past the end too) is moved to
 * the log's start, and the group's committed offset is left alone. kafkajs 2.2.4 committed
 * "earliest" through the group on this, outside any transaction, so the next owner of the
 * partition started over from its start and wrote every output again (kafkajs-offset-reset.ts).
 */
test('an out-of-range position should move the consumer to the log start without committing anything', {
  timeout: 60_000,
}, async () => {
  assert.ok(offsetResetPatched, 'the patch is installed');
  const topic = uniqueName('t-offset-reset');
  const groupId = `${topic}-group`;
  await createTopics([{ topic, partitions: 1 }]);
  await produce(
    topic,
    Array.from({ length: 10 }, (_, i) => ({ key: `k${i}`, value: String(i) })),
  );
  await withAdmin(async (a) => {
    await a.setOffsets({ groupId, topic, partitions: [{ partition: 0, offset: '3' }] });
    await a.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '6' }] });
  });
  const consumer = testKafka().consumer({ groupId, sessionTimeout: 6000, heartbeatInterval: 500 });
  const seen: string[] = [];
  try {
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ message }) => {
        seen.push(message.offset);
      },
    });
    const until = Date.now() + 30_000;
    while (seen.length < 4 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
  } finally {
    await consumer.disconnect();
  }
  assert.deepEqual(seen, ['6', '7', '8', '9'], 'read from the log start on');
  const committed = await withAdmin((a) => a.fetchOffsets({ groupId, topics: [topic] }));
  assert.equal(committed[0]?.partitions[0]?.offset, '3', 'the group offset is untouched');
});
