import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OffsetCommits } from '../../../src/kafka/offset-commits.js';
import type { TopicPartitionOffset } from '../../../src/kafka/types.js';

const o = (topic: string, partition: number, offset: string): TopicPartitionOffset => ({
  topic,
  partition,
  offset,
});

/** A commit function whose requests are answered by hand. */
function manual() {
  const sent: Array<{ offsets: TopicPartitionOffset[]; answer: (e?: unknown) => void }> = [];
  const commit = (offsets: TopicPartitionOffset[]) =>
    new Promise<void>((resolve, reject) => {
      sent.push({ offsets, answer: (e) => (e === undefined ? resolve() : reject(e)) });
    });
  return { sent, commit };
}

const turn = () => new Promise<void>((r) => setImmediate(r));

test('offset commits asked for while one is in flight should go together in the next request', async () => {
  const m = manual();
  const c = new OffsetCommits(m.commit);
  const first = c.commit([o('in', 0, '10')]);
  const second = c.commit([o('in', 1, '20')]);
  const third = c.commit([o('in', 2, '30'), o('in', 1, '25')]);
  await turn();
  assert.equal(m.sent.length, 1);
  assert.deepEqual(m.sent[0]!.offsets, [o('in', 0, '10')]);
  m.sent[0]!.answer();
  await first;
  await turn();
  assert.equal(m.sent.length, 2);
  // Partition 1 twice: the later offset, placed where it was asked for last.
  assert.deepEqual(m.sent[1]!.offsets, [o('in', 2, '30'), o('in', 1, '25')]);
  m.sent[1]!.answer();
  await Promise.all([second, third]);
  assert.equal(c.requests, 2);
});

test('a failed offset commit request should fail every commit it carried, and the next one go on', async () => {
  const m = manual();
  const c = new OffsetCommits(m.commit);
  const first = c.commit([o('in', 0, '10')]);
  const a = c.commit([o('in', 1, '20')]);
  const b = c.commit([o('in', 2, '30')]);
  await turn();
  m.sent[0]!.answer();
  await first;
  await turn();
  const boom = new Error('coordinator moved');
  m.sent[1]!.answer(boom);
  await assert.rejects(a, boom);
  await assert.rejects(b, boom);
  const later = c.commit([o('in', 0, '11')]);
  await turn();
  assert.equal(m.sent.length, 3);
  m.sent[2]!.answer();
  await later;
});

test('an empty offset commit should send nothing', async () => {
  const m = manual();
  const c = new OffsetCommits(m.commit);
  await c.commit([]);
  assert.equal(m.sent.length, 0);
  assert.equal(c.requests, 0);
});
