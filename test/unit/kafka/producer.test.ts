import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TransactionalProducer } from '../../../src/kafka/producer.js';

/**
 * kafkajs retries some transactional errors for a long time (AddPartitionsToTxn for a deleted
 * topic); closing the producer must end the caller's wait for its transaction at once.
 */
test('closing a transactional producer should fail its transaction in flight at once', async () => {
  const calls: string[] = [];
  const tx = {
    sendBatch: () => new Promise(() => undefined),
    sendOffsets: async () => undefined,
    commit: async () => calls.push('commit'),
    abort: () => {
      calls.push('abort');
      return new Promise(() => undefined);
    },
  };
  const raw = {
    transaction: async () => tx,
    disconnect: async () => calls.push('disconnect'),
  };
  const p = new TransactionalProducer(raw as any, 'app-0_0');
  const records = new Map([['out', [{ key: null, value: Buffer.from('x'), partition: 0 }]]]);
  const pending = p.commitTransaction(records, { groupId: 'app', offsets: [] });
  await new Promise((r) => setImmediate(r));
  assert.equal(p.inTransaction, true);
  await p.close();
  await assert.rejects(pending, /closed while its transaction was in flight/);
  assert.equal(p.inTransaction, false);
  assert.deepEqual(calls, ['disconnect', 'abort'], 'the abort is tried, not waited for; no commit');
});
