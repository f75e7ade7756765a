/**
 * Replaces kafkajs 2.2.4's `producer/groupMessagesPerPartition`, which is quadratic: it appends
 * each message with `[...current, message]`, copying the partition's list every time. A checkpoint
 * sends all its outputs and changelog records in one `sendBatch`, so with thousands of records per
 * partition this copy was the largest single cost of a worker (bench/profile.ts on the keyed count,
 * 200k records: 1.6 s of 8.1 s busy CPU, plus the garbage it made). This version pushes in place
 * and returns the same object (partition → messages, in input order).
 *
 * kafkajs's `sendMessages.js` binds the function when it is first loaded, so this module must be
 * evaluated before kafkajs itself: every file of src/kafka that imports kafkajs imports it first,
 * through kafkajs-preload.ts.
 * {@link kafkajsGroupingPatched} says whether that worked (a test checks it).
 */
import { createRequire } from 'node:module';
import { sendMessagesFactory } from './send-messages.js';

const require = createRequire(import.meta.url);

type Partitioner = (a: { topic: string; partitionMetadata: unknown[]; message: unknown }) => number;

export function groupMessagesPerPartition({
  topic,
  partitionMetadata,
  messages,
  partitioner,
}: {
  topic: string;
  partitionMetadata: unknown[];
  messages: unknown[];
  partitioner: Partitioner;
}): Record<number, unknown[]> {
  const result: Record<number, unknown[]> = {};
  if (partitionMetadata.length === 0) return result;
  for (const message of messages) {
    const partition = partitioner({ topic, partitionMetadata, message });
    const list = result[partition];
    if (list === undefined) result[partition] = [message];
    else list.push(message);
  }
  return result;
}

function patch(): boolean {
  const target = require.resolve('kafkajs/src/producer/groupMessagesPerPartition.js');
  const user = require.resolve('kafkajs/src/producer/sendMessages.js');
  if (require.cache[user] !== undefined) return require.cache[target]?.exports === groupMessagesPerPartition;
  require(target);
  const mod = require.cache[target];
  if (mod === undefined) return false;
  mod.exports = groupMessagesPerPartition;
  return true;
}

export const kafkajsGroupingPatched = patch();

/** kafkajs's own sendMessages, kept for the test that shows what it drops. */
export let kafkajsOriginalSendMessages: unknown;

/**
 * Replaces the exports of kafkajs's module `target` with `make(original)`, marked `sluicePatched`,
 * unless `user` (the module that binds `target` when it loads) is loaded already: then it only
 * reports whether an earlier call did it.
 */
function replaceBeforeUse(target: string, user: string, make: (original: any) => object): boolean {
  const t = require.resolve(`kafkajs/src/${target}`);
  if (require.cache[require.resolve(`kafkajs/src/${user}`)] !== undefined)
    return require.cache[t]?.exports?.sluicePatched === true;
  const original = require(t);
  const mod = require.cache[t];
  if (mod === undefined) return false;
  mod.exports = Object.assign(make(original), { sluicePatched: true });
  return true;
}

/** Installs send-messages.ts in place of kafkajs's `producer/sendMessages` (before its producer loads). */
function patchSend(): boolean {
  return replaceBeforeUse('producer/sendMessages.js', 'producer/messageProducer.js', (original) => {
    kafkajsOriginalSendMessages = original;
    return sendMessagesFactory(groupMessagesPerPartition);
  });
}

export const kafkajsSendPatched = patchSend();

/** Each kafkajs producer → its cluster (kafkajs keeps it private; producer.ts needs its coordinators). */
const producerClusters = new WeakMap<object, object>();

/** The cluster of a producer made after {@link kafkajsProducerPatched} installed. */
export function producerCluster(producer: object): object | undefined {
  return producerClusters.get(producer);
}

/**
 * Wraps kafkajs's `createProducer` (before kafkajs's index loads it) to remember each producer's
 * cluster: a transaction begun ahead of its checkpoint (TransactionalProducer.begin) sends
 * AddPartitionsToTxn and AddOffsetsToTxn, and later TxnOffsetCommit, through it.
 */
function patchProducer(): boolean {
  return replaceBeforeUse(
    'producer/index.js',
    'index.js',
    (original: (opts: { cluster: object }) => object) => (opts: { cluster: object }) => {
      const producer = original(opts);
      producerClusters.set(producer, opts.cluster);
      return producer;
    },
  );
}

export const kafkajsProducerPatched = patchProducer();
