import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { kafkajsOriginalSendMessages, kafkajsSendPatched } from '../../../src/kafka/kafkajs-patch.js';

const require = createRequire(import.meta.url);
const { KafkaJSConnectionError } = require('kafkajs/src/errors.js');

/**
 * A leader change during a send: partition 1's leader (node 2) dies mid-request and node 1, which
 * has just answered for partition 0, becomes its leader. The retry must send partition 1 to node 1.
 */
function world() {
  const leaders: Record<number, number> = { 0: 1, 1: 2 };
  const sent: Array<{ node: number; partitions: number[] }> = [];
  let node2Fails = true;
  const brokers = new Map<number, any>();
  const broker = (node: number) => {
    if (!brokers.has(node))
      brokers.set(node, {
        nodeId: node,
        async produce({ topicData }: any) {
          const partitions = topicData.flatMap((t: any) => t.partitions.map((p: any) => p.partition));
          if (node === 2 && node2Fails) {
            node2Fails = false;
            // Its leadership moves as it dies.
            leaders[1] = 1;
            throw new KafkaJSConnectionError('Connection error: broker 2 is gone');
          }
          sent.push({ node, partitions });
          return produced(topicData);
        },
      });
    return brokers.get(node);
  };
  const cluster = {
    targetTopics: new Set<string>(),
    async refreshMetadataIfNecessary() {},
    async refreshMetadata() {},
    async addMultipleTargetTopics() {},
    async connect() {},
    isConnected: () => true,
    removeBroker() {},
    findTopicPartitionMetadata: () => [{ partitionId: 0 }, { partitionId: 1 }],
    findLeaderForPartitions(_topic: string, partitions: Array<number | string>) {
      const out: Record<number, number[]> = {};
      for (const p of partitions.map(Number)) (out[leaders[p]!] ??= []).push(p);
      return out;
    },
    async findBroker({ nodeId }: { nodeId: number | string }) {
      return broker(Number(nodeId));
    },
  };
  const eosManager = {
    isTransactional: () => false,
    async acquireBrokerLock() {},
    async releaseBrokerLock() {},
    getSequence: () => 0,
    updateSequence() {},
    getProducerId: () => -1,
    getProducerEpoch: () => 0,
    getTransactionalId: () => undefined,
  };
  const retrier = async (fn: any) => {
    let bailed: unknown;
    for (let i = 0; i < 5; i++) {
      try {
        return await fn((e: unknown) => (bailed = e ?? new Error('bail')), i, 0);
      } catch (e) {
        if (bailed) throw bailed;
        if (i === 4) throw e;
      }
    }
  };
  const logger = { debug() {}, error() {}, info() {}, warn() {} };
  const deps = { logger, cluster, eosManager, retrier, partitioner: ({ message }: any) => message.partition };
  const topicMessages = [
    {
      topic: 't',
      messages: [
        { partition: 0, value: 'a' },
        { partition: 1, value: 'b' },
      ],
    },
  ];
  return { deps, sent, topicMessages };
}

/** A broker's answer to a Produce: every partition written, at offset 0. */
function produced(topicData: any[]) {
  return {
    topics: topicData.map((t: any) => ({
      topicName: t.topic,
      partitions: t.partitions.map((p: any) => ({ partition: p.partition, errorCode: 0, baseOffset: '0' })),
    })),
  };
}

test('the send patch is installed before kafkajs loads its producer', () => {
  assert.equal(kafkajsSendPatched, true);
  assert.equal(require('kafkajs/src/producer/sendMessages.js').sluicePatched, true);
});

test('kafkajs 2.2.4 drops a partition whose leader moved to a broker that had answered (the bug)', async () => {
  const w = world();
  const send = (kafkajsOriginalSendMessages as any)(w.deps);
  const res = await send({ acks: -1, timeout: 1000, topicMessages: w.topicMessages });
  assert.deepEqual(w.sent, [{ node: 1, partitions: [0] }], 'partition 1 was never written');
  assert.equal(res.length, 1, 'and the send resolved anyway');
});

test('a retry should send every partition without an answer to its current leader', async () => {
  const w = world();
  const { sendMessagesFactory } = await import('../../../src/kafka/send-messages.js');
  const { groupMessagesPerPartition } = await import('../../../src/kafka/kafkajs-patch.js');
  const send = sendMessagesFactory(groupMessagesPerPartition as any)(w.deps);
  const res = await send({ acks: -1, timeout: 1000, topicMessages: w.topicMessages });
  assert.deepEqual(
    w.sent.sort((a, b) => a.partitions[0]! - b.partitions[0]!),
    [
      { node: 1, partitions: [0] },
      { node: 1, partitions: [1] },
    ],
    'partition 1 sent again, to its new leader; partition 0 once',
  );
  assert.deepEqual(res.map((r: any) => r.partition).sort(), [0, 1]);
});

test('an AddPartitionsToTxn refused with CONCURRENT_TRANSACTIONS is sent again after a few ms, in place, not through the retrier', async () => {
  const { sendMessagesFactory } = await import('../../../src/kafka/send-messages.js');
  const { groupMessagesPerPartition } = await import('../../../src/kafka/kafkajs-patch.js');
  const w = world();
  const calls: string[] = [];
  let refusals = 3;
  let retrierTries = 0;
  const eosManager = {
    ...w.deps.eosManager,
    isTransactional: () => true,
    getTransactionalId: () => 'app-0_0',
    async addPartitionsToTransaction() {
      calls.push('add');
      if (refusals-- > 0)
        throw Object.assign(new Error('concurrent'), {
          name: 'KafkaJSProtocolError',
          type: 'CONCURRENT_TRANSACTIONS',
          code: 51,
          retriable: true,
        });
    },
  };
  const cluster = {
    ...w.deps.cluster,
    async refreshMetadata() {
      calls.push('metadata');
    },
  };
  const retrier = (fn: any) => {
    retrierTries++;
    return w.deps.retrier(fn);
  };
  const send = sendMessagesFactory(groupMessagesPerPartition as any)({
    ...w.deps,
    cluster,
    eosManager,
    retrier,
  });
  const started = performance.now();
  await send({
    acks: -1,
    timeout: 1000,
    topicMessages: [{ topic: 't', messages: [{ partition: 0, value: 'a' }] }],
  });
  const took = performance.now() - started;
  assert.deepEqual(calls, ['add', 'add', 'add', 'add']);
  assert.equal(retrierTries, 1);
  // 5 + 10 + 20 ms of backoff (a timer can fire up to ~1 ms early by performance.now()).
  assert.ok(took >= 30, `took ${took} ms`);

  // A coordinator that keeps refusing: six tries in place, then the retrier's (metadata, again).
  calls.length = 0;
  refusals = 6;
  await send({
    acks: -1,
    timeout: 1000,
    topicMessages: [{ topic: 't', messages: [{ partition: 0, value: 'a' }] }],
  });
  assert.deepEqual(calls, ['add', 'add', 'add', 'add', 'add', 'add', 'metadata', 'add']);
  retrierTries = 1;

  // Any other error goes to the retrier as before: a metadata refresh, then its next try.
  calls.length = 0;
  let other = true;
  eosManager.addPartitionsToTransaction = async () => {
    calls.push('add');
    if (other) {
      other = false;
      throw Object.assign(new Error('timed out'), {
        name: 'KafkaJSProtocolError',
        type: 'REQUEST_TIMED_OUT',
        code: 7,
        retriable: true,
      });
    }
  };
  await send({
    acks: -1,
    timeout: 1000,
    topicMessages: [{ topic: 't', messages: [{ partition: 0, value: 'a' }] }],
  });
  assert.deepEqual(calls, ['add', 'metadata', 'add']);
  assert.equal(retrierTries, 2);
});

test('a record for a partition the metadata does not list should fail the send, not resolve unwritten', async () => {
  const w = world();
  const { sendMessagesFactory } = await import('../../../src/kafka/send-messages.js');
  const { groupMessagesPerPartition } = await import('../../../src/kafka/kafkajs-patch.js');
  const send = sendMessagesFactory(groupMessagesPerPartition as any)(w.deps);
  // kafkajs's own findLeaderForPartitions leaves such a partition out of its answer.
  w.deps.cluster.findLeaderForPartitions = (_topic: string, partitions: Array<number | string>) => {
    const out: Record<number, number[]> = {};
    for (const p of partitions.map(Number)) if (p < 2) (out[1] ??= []).push(p);
    return out;
  };
  const topicMessages = [
    {
      topic: 't',
      messages: [
        { partition: 0, value: 'a' },
        { partition: 2, value: 'c' },
      ],
    },
  ];
  await assert.rejects(
    send({ acks: -1, timeout: 1000, topicMessages }),
    /partition 2 of topic t, which its metadata does not list/,
  );
  assert.deepEqual(w.sent, [], 'nothing of the send went out');
});
