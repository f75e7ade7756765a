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
const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await turn();
};

test('offset commits asked for in one turn or while one is in flight should share requests', async () => {
  const m = manual();
  const c = new OffsetCommits({ commit: m.commit });
  const first = c.commit([o('in', 0, '10')]);
  const sameTurn = c.commit([o('in', 3, '40')]);
  await turns(2);
  assert.equal(m.sent.length, 1);
  assert.deepEqual(m.sent[0]!.offsets, [o('in', 0, '10'), o('in', 3, '40')]);
  const second = c.commit([o('in', 1, '20')]);
  const third = c.commit([o('in', 2, '30'), o('in', 1, '25')]);
  m.sent[0]!.answer();
  await Promise.all([first, sameTurn]);
  await turns(2);
  assert.equal(m.sent.length, 2);
  // Partition 1 twice: the later offset, placed where it was asked for last.
  assert.deepEqual(m.sent[1]!.offsets, [o('in', 2, '30'), o('in', 1, '25')]);
  m.sent[1]!.answer();
  await Promise.all([second, third]);
  assert.equal(c.requests, 2);
});

test('a failed merged request should be sent again per commit, each settled by its own answer', async () => {
  const m = manual();
  const c = new OffsetCommits({ commit: m.commit });
  const good = c.commit([o('in', 0, '10')]);
  const bad = c.commit([o('gone', 0, '5')]);
  await turns(2);
  assert.equal(m.sent.length, 1);
  m.sent[0]!.answer(new Error('UNKNOWN_TOPIC_OR_PARTITION'));
  await turns(2);
  assert.deepEqual(m.sent[1]!.offsets, [o('in', 0, '10')]);
  m.sent[1]!.answer();
  await good;
  await turns(2);
  assert.deepEqual(m.sent[2]!.offsets, [o('gone', 0, '5')]);
  const boom = new Error('UNKNOWN_TOPIC_OR_PARTITION');
  m.sent[2]!.answer(boom);
  await assert.rejects(bad, boom);
  // The queue goes on.
  const later = c.commit([o('in', 0, '11')]);
  await turns(2);
  m.sent[3]!.answer();
  await later;
});

test('a request unanswered past the timeout should fail its commits and let the queue go on', async () => {
  const m = manual();
  const c = new OffsetCommits({ commit: m.commit, timeoutMs: 20 });
  const stuck = c.commit([o('in', 0, '10')]);
  // The timeout's timer does not hold the process (a stopping worker exits); this test's does.
  const hold = setTimeout(() => undefined, 1000);
  await assert.rejects(stuck, /unanswered after 20 ms/);
  clearTimeout(hold);
  const next = c.commit([o('in', 0, '12')]);
  await turns(2);
  assert.equal(m.sent.length, 2);
  m.sent[1]!.answer();
  await next;
});

test('a commit asked for under an older generation should not be sent', async () => {
  const m = manual();
  let generation = 4;
  const c = new OffsetCommits({ commit: m.commit, generation: () => generation });
  const old = c.commit([o('in', 0, '10')]);
  generation = 5; // a rebalance before the request went
  const fresh = c.commit([o('in', 1, '20')]);
  await assert.rejects(old, /generation 4, now 5/);
  await turns(2);
  assert.equal(m.sent.length, 1);
  assert.deepEqual(m.sent[0]!.offsets, [o('in', 1, '20')]);
  m.sent[0]!.answer();
  await fresh;
});

test('an empty offset commit should send nothing', async () => {
  const m = manual();
  const c = new OffsetCommits({ commit: m.commit });
  await c.commit([]);
  await turns(2);
  assert.equal(m.sent.length, 0);
  assert.equal(c.requests, 0);
});
