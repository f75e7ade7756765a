/**
 * Replaces kafkajs 2.2.4's `producer/sendMessages`, which can drop records when a partition's
 * leader moves during a send. It keeps the answers of a `sendBatch` per broker and, on a retry
 * (after a dead broker or NOT_LEADER), sends again only to brokers without an answer. A
 * partition whose leader moved to a broker that had already answered for its other partitions is
 * therefore never sent again, and `sendBatch` resolves as if it had been written: in a
 * transaction, the commit then makes the rest of the checkpoint visible without those records
 * (a 3-broker test, SIGKILLing the leader: 90–149 of 30,000 running sums missing, the state past
 * them). This version tracks the answers per partition and resends every partition without one,
 * to its current leader; otherwise it does what kafkajs's does (one produce request per leader,
 * partitions added to the transaction first, sequence numbers taken and given back on failure,
 * the same retry and metadata refresh rules). Two more differences: a retry starts only once every
 * request of the attempt has settled, and a request sends only what is still unanswered once it
 * holds its broker (kafkajs's could resend, with new sequence numbers, what a request in flight
 * had just written: duplicates the broker cannot recognise). Records are grouped into partitions
 * once per send, so a retry never moves an answered record to another partition.
 *
 * Installed, like the grouping patch, before kafkajs loads its producer (kafkajs-patch.ts). It
 * is also where each producer's cluster gets its coordinator cache (coordinator-cache.ts).
 */
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { cacheCoordinators } from './coordinator-cache.js';
import { someInChain } from './error-chain.js';
import { recordCount } from './record-batch.js';

const require = createRequire(import.meta.url);

type Any = any;
type Grouper = (a: {
  topic: string;
  partitionMetadata: unknown[];
  messages: unknown[];
  partitioner: Any;
}) => Record<number, unknown[]>;

/**
 * CONCURRENT_TRANSACTIONS (51): the transaction coordinator is still completing a state change of
 * this transactional id (the previous transaction's commit markers, or the last AddPartitionsToTxn,
 * being appended to its replicated log: longer on a 3-node cluster, where each append waits for
 * the in-sync replicas). Nothing of the refused request was applied; it can be sent again.
 */
export function isConcurrentTransactions(e: unknown): boolean {
  return someInChain(e, (x) => x.type === 'CONCURRENT_TRANSACTIONS' || x.code === 51);
}

/** Tries of a request that meets CONCURRENT_TRANSACTIONS (5 ms of wait, doubling to 1 s: about 7 s). */
export const CONCURRENT_TRANSACTIONS_ATTEMPTS = 15;

/**
 * AddPartitionsToTxn's tries in place (5 + 10 + 20 + 40 + 80 ms of waits: the markers of the
 * previous transaction take a few ms). Past them the error goes to the send's retrier, which
 * refreshes metadata, waits its own backoff and sends again (each of its tries with these in
 * place): a coordinator stuck for longer fails the checkpoint after about as long as before.
 */
const ADD_PARTITIONS_ATTEMPTS = 6;

/**
 * Sends a transactional request again while the coordinator answers CONCURRENT_TRANSACTIONS:
 * after 5 ms, doubling to 1 s, up to `attempts` tries; any other error, or the last refusal, is
 * thrown. A checkpoint that starts right after the previous one meets it on its first
 * AddPartitionsToTxn while the coordinator writes that one's markers, which takes a few ms; the
 * Java producer retries it after 20 ms (KAFKA-5477). `wait` lets a caller race the waits too.
 */
export async function retryConcurrentTransactions<T>(
  send: () => Promise<T>,
  attempts: number,
  wait: (ms: number) => Promise<unknown> = sleep,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (e) {
      if (!isConcurrentTransactions(e) || attempt >= attempts) throw e;
      await wait(Math.min(1000, 5 * 2 ** (attempt - 1)));
    }
  }
}

/**
 * Each producer's cluster → its transactional manager (kafkajs's `eosManager` of transactions:
 * producer id, epoch, the partitions added to the transaction in flight), recorded when a
 * transaction makes its message producer, for the transaction begun ahead (producer.ts).
 */
const transactionalManagers = new WeakMap<object, Any>();

/** The transactional manager of the producer whose cluster this is, once it began a transaction. */
export function transactionalManagerOf(cluster: object): Any | undefined {
  return transactionalManagers.get(cluster);
}

export function sendMessagesFactory(groupMessagesPerPartition: Grouper) {
  const { KafkaJSMetadataNotLoaded } = require('kafkajs/src/errors.js');
  const { staleMetadata } = require('kafkajs/src/protocol/error.js');
  const createTopicData = require('kafkajs/src/producer/createTopicData.js');
  const responseSerializer = require('kafkajs/src/producer/responseSerializer.js');

  return ({ logger, cluster, partitioner, eosManager, retrier }: Any) => {
    // Called once per producer, with its own cluster: its transactional requests find their
    // coordinators without a FindCoordinator round trip each (coordinator-cache.ts).
    cacheCoordinators(cluster);
    if (eosManager?.isTransactional?.() === true) transactionalManagers.set(cluster, eosManager);
    return async ({ acks, timeout, compression, topicMessages }: Any) => {
      /** `topic\0partition` → that partition's answer (an empty list under acks 0). */
      const answered = new Map<string, unknown[]>();
      type Grouped = Array<{ topic: string; messagesPerPartition: Record<number, unknown[]> }>;
      let grouped: Grouped | undefined;

      const createProducerRequests = async () => {
        await cluster.refreshMetadataIfNecessary();
        if (grouped === undefined) {
          const g: Grouped = [];
          for (const { topic, messages } of topicMessages) {
            const partitionMetadata = cluster.findTopicPartitionMetadata(topic);
            if (partitionMetadata.length === 0) {
              logger.debug('Producing to topic without metadata', {
                topic,
                targetTopics: Array.from(cluster.targetTopics),
              });
              throw new KafkaJSMetadataNotLoaded('Producing to topic without metadata');
            }
            g.push({
              topic,
              messagesPerPartition: groupMessagesPerPartition({
                topic,
                partitionMetadata,
                messages,
                partitioner,
              }),
            });
          }
          grouped = g;
        }
        const groups: Grouped = grouped;
        /** Leader node id → what it gets: per topic, the partitions still without an answer. */
        const perLeader = new Map<
          string,
          Array<{ topic: string; partitions: number[]; messagesPerPartition: Any }>
        >();
        for (const { topic, messagesPerPartition } of groups) {
          const pending = Object.keys(messagesPerPartition)
            .map(Number)
            .filter((p) => !answered.has(`${topic}\u0000${p}`));
          if (pending.length === 0) continue;
          const leaders = cluster.findLeaderForPartitions(topic, pending) as Record<string, number[]>;
          // kafkajs leaves out a partition its metadata does not list (a record given a partition
          // the topic does not have): the send would resolve without it. It fails instead, after
          // the retrier's metadata refreshes, so nothing is reported written that was not.
          let covered = 0;
          for (const l of Object.values(leaders)) covered += l.length;
          if (covered < pending.length) {
            const listed = new Set(Object.values(leaders).flat());
            const missing = pending.filter((p) => !listed.has(p));
            throw new KafkaJSMetadataNotLoaded(
              `Producing to partition ${missing.join(', ')} of topic ${topic}, which its metadata does not list`,
            );
          }
          for (const [nodeId, partitions] of Object.entries(leaders)) {
            let l = perLeader.get(nodeId);
            if (!l) perLeader.set(nodeId, (l = []));
            l.push({ topic, partitions, messagesPerPartition });
          }
        }
        return [...perLeader].map(async ([nodeId, forBroker]) => {
          const broker = await cluster.findBroker({ nodeId });
          await eosManager.acquireBrokerLock(broker);
          try {
            // Only what is still unanswered once the broker is ours (never a second copy with
            // new sequence numbers of what a request in flight got written meanwhile).
            const still = forBroker
              .map((t) => ({
                ...t,
                partitions: t.partitions.filter((p) => !answered.has(`${t.topic}\u0000${p}`)),
              }))
              .filter((t) => t.partitions.length > 0);
            if (still.length === 0) return;
            const topicData = createTopicData(still);
            // Retried here, not by the send's retrier: each of its tries costs a metadata refresh and
            // the client's retry backoff (200 ms and more, client.ts) on the way to the commit.
            if (eosManager.isTransactional())
              await retryConcurrentTransactions(
                () => eosManager.addPartitionsToTransaction(topicData),
                ADD_PARTITIONS_ATTEMPTS,
              );
            for (const { topic, partitions } of topicData)
              for (const entry of partitions) {
                entry.firstSequence = eosManager.getSequence(topic, entry.partition);
                // A batch entry (records the collector wrote ahead) stands for its records.
                eosManager.updateSequence(topic, entry.partition, recordCount(entry.messages));
              }
            let response: unknown;
            try {
              response = await broker.produce({
                transactionalId: eosManager.isTransactional() ? eosManager.getTransactionalId() : undefined,
                producerId: eosManager.getProducerId(),
                producerEpoch: eosManager.getProducerEpoch(),
                acks,
                timeout,
                compression,
                topicData,
              });
            } catch (e) {
              for (const { topic, partitions } of topicData)
                for (const entry of partitions)
                  eosManager.updateSequence(topic, entry.partition, -recordCount(entry.messages));
              throw e;
            }
            const formatted: Array<{ topicName: string; partition: number }> =
              acks !== 0 ? responseSerializer(response) : [];
            for (const { topic, partitions } of topicData)
              for (const entry of partitions)
                answered.set(
                  `${topic}\u0000${entry.partition}`,
                  formatted.filter((r) => r.topicName === topic && r.partition === entry.partition),
                );
          } finally {
            await eosManager.releaseBrokerLock(broker);
          }
        });
      };

      return retrier(async (bail: (e: unknown) => void, retryCount: number, retryTime: number) => {
        const topics = topicMessages.map(({ topic }: { topic: string }) => topic);
        await cluster.addMultipleTargetTopics(topics);
        try {
          const requests = await createProducerRequests();
          // All settled before a retry: none still in flight when the unanswered are sent again.
          const settled = await Promise.allSettled(requests);
          const failed = settled.find((r) => r.status === 'rejected');
          if (failed) throw (failed as PromiseRejectedResult).reason;
          return [...answered.values()].flat();
        } catch (err) {
          const e = err as Any;
          if (e.name === 'KafkaJSConnectionClosedError') cluster.removeBroker({ host: e.host, port: e.port });
          if (!cluster.isConnected()) {
            logger.debug(`Cluster has disconnected, reconnecting: ${e.message}`, { retryCount, retryTime });
            await cluster.connect();
            await cluster.refreshMetadata();
            throw e;
          }
          if (
            staleMetadata(e) ||
            e.name === 'KafkaJSMetadataNotLoaded' ||
            e.name === 'KafkaJSConnectionError' ||
            e.name === 'KafkaJSConnectionClosedError' ||
            (e.name === 'KafkaJSProtocolError' && e.retriable)
          ) {
            logger.error(`Failed to send messages: ${e.message}`, { retryCount, retryTime });
            await cluster.refreshMetadata();
            throw e;
          }
          logger.error(`${e.message}`, { retryCount, retryTime });
          if (e.retriable) throw e;
          bail(e);
        }
      });
    };
  };
}
