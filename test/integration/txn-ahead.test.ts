/**
 * A transaction begun ahead of its checkpoint (TransactionalProducer.begin, issue 19): the
 * partitions and the offsets' group are added while the task is still processing, so the
 * checkpoint sends only Produce, TxnOffsetCommit and EndTxn. Counted by Kafka's own console
 * consumer (read_committed), on a real broker, including a fence while a transaction is begun.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Producer } from 'kafkajs';
import { readCommittedWithJava } from '../../bench/java-reader.js';
import { isFencedError, type TopicRecords, TransactionalProducer } from '../../src/kafka/producer.js';
import type { OutRecord } from '../../src/kafka/types.js';
import {
  brokers,
  createTopics,
  deleteTopicsMatching,
  testKafka,
  uniqueName,
  withAdmin,
} from '../helpers/kafka.js';

interface Made {
  tp: TransactionalProducer;
  /** The API name of every request answered since the producer was made, in order. */
  requests: string[];
}

async function transactional(t: { after: (fn: () => Promise<unknown>) => void }, id: string): Promise<Made> {
  const p: Producer = testKafka().producer({ transactionalId: id, idempotent: true, maxInFlightRequests: 5 });
  const requests: string[] = [];
  p.on(p.events.REQUEST, (e) => requests.push(e.payload.apiName));
  await p.connect();
  const tp = new TransactionalProducer(p, id);
  t.after(() => tp.close());
  await tp.fence();
  return { tp, requests };
}

const rec = (key: string, value: string, partition?: number): OutRecord => ({
  key: Buffer.from(key),
  value: Buffer.from(value),
  ...(partition === undefined ? {} : { partition }),
});

async function topics(t: { after: (fn: () => Promise<unknown>) => void }, prefix: string) {
  const id = uniqueName(prefix);
  const out = `${id}-out`;
  const log = `${id}-changelog`;
  const input = `${id}-in`;
  await createTopics([
    { topic: out, partitions: 2 },
    { topic: log, partitions: 2 },
    { topic: input, partitions: 1 },
  ]);
  t.after(() => deleteTopicsMatching(id));
  return { id, out, log, input, group: `${id}-group` };
}

/** A commit interval well within the transaction timeout (the bench's and the tests'). */
const INTERVAL = 100;

/**
 * A task's producer that committed one transaction (`first` to `out`, offset 1 of `input`) and
 * began the next one ahead, its Add requests answered.
 */
async function begunAfterOneCommit(
  t: { after: (fn: () => Promise<unknown>) => void },
  prefix: string,
  first: string,
) {
  const { id, out, input, group } = await topics(t, prefix);
  const tid = `${id}-0_0`;
  const offsets = (o: string) => ({ groupId: group, offsets: [{ topic: input, partition: 0, offset: o }] });
  const made = await transactional(t, tid);
  await made.tp.commitTransaction(new Map([[out, [rec('a', first)]]]), offsets('1'));
  made.tp.begin(INTERVAL);
  await made.tp.whenBegun();
  return { made, tid, out, input, group, offsets };
}

test('a transaction begun ahead commits with only Produce, TxnOffsetCommit and EndTxn at its checkpoint', {
  timeout: 120_000,
}, async (t) => {
  const { id, out, log, input, group } = await topics(t, 't-ahead');
  const m = await transactional(t, `${id}-0_0`);
  const offsets = (o: string) => ({ groupId: group, offsets: [{ topic: input, partition: 0, offset: o }] });
  m.tp.begin(INTERVAL);
  assert.equal(m.tp.begun, false, 'nothing to begin before the first commit (no partitions known)');

  const first: TopicRecords = new Map([
    [out, [rec('a', '1'), rec('b', '1'), rec('c', '1')]],
    [log, [rec('a', '1', 0)]],
  ]);
  await m.tp.commitTransaction(first, offsets('3'));

  m.tp.begin(30_000);
  assert.equal(
    m.tp.begun,
    false,
    'nothing begins ahead with an interval over a third of the transaction timeout',
  );
  const before = m.requests.length;
  m.tp.begin(INTERVAL);
  assert.equal(m.tp.begun, true, 'begun after a commit');
  m.tp.begin(INTERVAL); // a second call while one is begun changes nothing
  await m.tp.whenBegun();
  const added = m.requests.slice(before);
  assert.ok(
    added.includes('AddPartitionsToTxn') && added.includes('AddOffsetsToTxn'),
    `the Add requests went ahead: ${added}`,
  );

  const atCheckpoint = m.requests.length;
  const second: TopicRecords = new Map([
    [out, [rec('a', '2'), rec('b', '2'), rec('c', '2')]],
    [log, [rec('a', '2', 0)]],
  ]);
  await m.tp.commitTransaction(second, offsets('6'));
  assert.equal(m.tp.begun, false, 'the checkpoint took the transaction begun ahead');
  const sent = m.requests.slice(atCheckpoint).filter((x) => x !== 'Metadata');
  assert.deepEqual(
    [...new Set(sent)].sort(),
    ['EndTxn', 'Produce', 'TxnOffsetCommit'],
    `the checkpoint's requests: ${sent}`,
  );

  // A third checkpoint, begun ahead, that also writes a partition the last one did not: the send
  // adds that one itself.
  m.tp.begin(INTERVAL);
  await m.tp.whenBegun();
  const third: TopicRecords = new Map([
    [out, [rec('a', '3')]],
    [log, [rec('a', '3', 0), rec('z', '3', 1)]],
  ]);
  await m.tp.commitTransaction(third, offsets('9'));

  const [outs, logs] = await Promise.all(
    [out, log].map((topic) => readCommittedWithJava(brokers().join(','), topic, { withValues: true })),
  );
  assert.deepEqual(
    outs!.map((r) => r.value).sort(),
    ['1', '1', '1', '2', '2', '2', '3'],
    'every output committed exactly once',
  );
  assert.deepEqual(
    logs!.map((r) => `${r.partition}:${r.value}`).sort(),
    ['0:1', '0:2', '0:3', '1:3'],
    'every changelog record committed exactly once, the new partition too',
  );
  const committed = await withAdmin((a) => a.fetchOffsets({ groupId: group, topics: [input] }));
  assert.equal(committed[0]?.partitions[0]?.offset, '9', 'the offsets of the last transaction are committed');
});

test('a transaction begun ahead is fenced by a new owner: its checkpoint fails and nothing of it is visible', {
  timeout: 120_000,
}, async (t) => {
  const {
    made: old,
    tid,
    out,
    input,
    group,
    offsets,
  } = await begunAfterOneCommit(t, 't-ahead-fence', 'old-1');

  // The new owner's fence aborts the transaction begun ahead and bumps the epoch.
  const next = await transactional(t, tid);
  await assert.rejects(
    old.tp.commitTransaction(new Map([[out, [rec('a', 'old-2')]]]), offsets('5')),
    (e) => isFencedError(e),
    "the old owner's checkpoint is fenced",
  );
  await next.tp.commitTransaction(new Map([[out, [rec('a', 'new-2')]]]), offsets('2'));

  const outs = await readCommittedWithJava(brokers().join(','), out, { withValues: true });
  assert.deepEqual(outs.map((r) => r.value).sort(), ['new-2', 'old-1'], 'nothing of the fenced transaction');
  const committed = await withAdmin((a) => a.fetchOffsets({ groupId: group, topics: [input] }));
  assert.equal(committed[0]?.partitions[0]?.offset, '2', "the new owner's offsets, none of the fenced one's");
});

test('closing a producer with a transaction begun ahead aborts it: the next owner fences and commits', {
  timeout: 120_000,
}, async (t) => {
  const { made: first, tid, out, offsets } = await begunAfterOneCommit(t, 't-ahead-close', '1');
  const before = first.requests.length;
  await first.tp.close();
  assert.ok(
    first.requests.slice(before).includes('EndTxn'),
    'the close ended (aborted) the transaction begun ahead',
  );
  first.tp.begin(INTERVAL);
  assert.equal(first.tp.begun, false, 'nothing begins after close');

  const next = await transactional(t, tid);
  await next.tp.commitTransaction(new Map([[out, [rec('a', '2')]]]), offsets('2'));
  const outs = await readCommittedWithJava(brokers().join(','), out, { withValues: true });
  assert.deepEqual(outs.map((r) => r.value).sort(), ['1', '2']);
});
