import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { abortedFilterInstalled, filterAbortedMessages } from '../../../src/kafka/aborted-filter.js';
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
