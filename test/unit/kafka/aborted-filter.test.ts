import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import {
  abortedFilterInstalled,
  filterAbortedMessages,
  isAbortMarker,
} from '../../../src/kafka/aborted-filter.js';
import '../../../src/kafka/client.js';

const require = createRequire(import.meta.url);

const ABORT = Buffer.from([0, 0, 0, 0]);
const COMMIT = Buffer.from([0, 0, 0, 1]);
const rec = (offset: number, producerId: string, control?: Buffer) => ({
  offset: String(offset),
  key: control ?? Buffer.from(`r${offset}`),
  isControlRecord: control !== undefined,
  batchContext: { producerId, inTransaction: true },
});

/**
 * The shape seen on a DLQ partition after SIGKILLs: B (producer 259) begins at 10, C (producer
 * 257) at 13; C was aborted first, so the broker lists C before B.
 */
const messages = [
  rec(8, '257'),
  rec(9, '257', COMMIT),
  rec(10, '259'),
  rec(11, '259'),
  rec(12, '260'),
  rec(13, '257'),
  rec(14, '260', COMMIT),
  rec(15, '257', ABORT),
  rec(16, '259', ABORT),
  rec(17, '259'),
];
const abortedTransactions = [
  { producerId: '257', firstOffset: '13' },
  { producerId: '259', firstOffset: '10' },
];
const kept = (ms: Array<{ offset: string; isControlRecord?: boolean }>) =>
  ms.filter((m) => !m.isControlRecord).map((m) => Number(m.offset));

test('the aborted filter should drop every aborted transaction, whatever order the broker lists them in', () => {
  assert.deepEqual(kept(filterAbortedMessages({ messages, abortedTransactions })), [8, 12, 17]);
  assert.deepEqual(
    kept(filterAbortedMessages({ messages, abortedTransactions: [...abortedTransactions].reverse() })),
    [8, 12, 17],
  );
  assert.deepEqual(
    kept(filterAbortedMessages({ messages, abortedTransactions: [] })),
    [8, 10, 11, 12, 13, 17],
  );
});

test("kafkajs's own filter should be the one that fails this case (the reason for the fix)", () => {
  const path = require.resolve('kafkajs/src/consumer/filterAbortedMessages.js');
  const ours = require.cache[path]!;
  delete require.cache[path];
  try {
    const original = require(path) as typeof filterAbortedMessages;
    assert.deepEqual(
      kept(original({ messages, abortedTransactions })),
      [8, 10, 11, 12, 17],
      'kafkajs 2.2.4 leaks 10 and 11',
    );
  } finally {
    require.cache[path] = ours;
  }
});

test("kafkajs's consumer batches should use the fixed filter once src/kafka is loaded", () => {
  assert.equal(abortedFilterInstalled, true);
  const Batch = require('kafkajs/src/consumer/batch.js');
  const b = new Batch('t', '8', { partition: 0, highWatermark: '18', messages, abortedTransactions });
  assert.deepEqual(kept(b.messages), [8, 12, 17]);
});

test('a data record whose key is 00 00 00 00 should not end an aborted transaction', () => {
  const lookalike = { ...rec(11, '259'), key: Buffer.from([0, 0, 0, 0]), isControlRecord: false };
  const ms = [rec(10, '259'), lookalike, rec(12, '259'), rec(13, '259', ABORT), rec(14, '259')];
  const got = filterAbortedMessages({
    messages: ms,
    abortedTransactions: [{ producerId: '259', firstOffset: '10' }],
  });
  assert.deepEqual(kept(got), [14], 'records 10–12 belong to the aborted transaction');
  assert.equal(isAbortMarker(lookalike), false);
});

test('an abort marker should be known by the control bit and the type field of its key', () => {
  const ctx = (isControlBatch: boolean) => ({ producerId: '1', inTransaction: true, isControlBatch });
  const marker = (key: Buffer, control: boolean) => ({
    key,
    isControlRecord: control,
    batchContext: ctx(control),
  });
  assert.equal(isAbortMarker(marker(ABORT, true)), true);
  assert.equal(
    isAbortMarker(marker(Buffer.from([0, 1, 0, 0]), true)),
    true,
    'a later key version, type ABORT',
  );
  assert.equal(isAbortMarker(marker(COMMIT, true)), false);
  assert.equal(isAbortMarker(marker(ABORT, false)), false);
  // kafkajs copies the batch's control bit to each record; the batch context alone is enough too.
  assert.equal(isAbortMarker({ key: ABORT, batchContext: ctx(true) }), true);
});
