import './kafkajs-preload.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { CompressionTypes, type Producer, type RecordMetadata, type Transaction } from 'kafkajs';
import { someInChain } from './error-chain.js';
import {
  CONCURRENT_TRANSACTIONS_ATTEMPTS,
  isConcurrentTransactions,
  ON_PARTITIONS_ADDED,
  retryConcurrentTransactions,
  TXN_INTERNALS,
  type TxnInternals,
  takeWrittenPartitions,
} from './send-messages.js';
import type { OutRecord, TopicPartitionOffset } from './types.js';

export type TopicRecords = ReadonlyMap<string, OutRecord[]>;

/** Highest offset written per topic-partition by one send, from the broker's answer. */
export type WrittenOffsets = Map<string, bigint>;

/**
 * Bytes of one topic per send, at most (roughly). The broker refuses a record batch larger than
 * `message.max.bytes` (1 MiB by default) and kafkajs puts all of one partition's messages of a
 * send into one batch, so a topic's records go out in chunks of up to this size, the n-th chunk of
 * every topic in the n-th send. A send's topics do not add up: a checkpoint of 300 KB of outputs
 * and 200 KB of changelog records is one Produce request, not two in a row (issue 19: they were
 * two at half load, each a round trip on the way to the commit).
 */
const MAX_SEND_BYTES = 512 * 1024;

function sizeOf(m: OutRecord): number {
  let n = 64 + (m.key?.length ?? 0) + (m.value?.length ?? 0);
  if (m.headers)
    for (const [k, v] of Object.entries(m.headers))
      n += k.length + (typeof v === 'string' ? v.length * 3 : Buffer.isBuffer(v) ? v.length : 64);
  return n;
}

/** The records as a list of sends, each holding at most about MAX_SEND_BYTES of each topic. */
export function toSends(records: TopicRecords): Array<Array<{ topic: string; messages: OutRecord[] }>> {
  const sends: Array<Array<{ topic: string; messages: OutRecord[] }>> = [];
  for (const [topic, messages] of records) {
    let i = 0;
    let chunk: OutRecord[] = [];
    let bytes = 0;
    for (const m of messages) {
      const sz = sizeOf(m);
      if (bytes + sz > MAX_SEND_BYTES && chunk.length > 0) {
        (sends[i++] ??= []).push({ topic, messages: chunk });
        chunk = [];
        bytes = 0;
      }
      chunk.push(m);
      bytes += sz;
    }
    if (chunk.length > 0) (sends[i] ??= []).push({ topic, messages: chunk });
  }
  return sends;
}

function mergeMax(into: WrittenOffsets, from: WrittenOffsets): void {
  for (const [k, v] of from) {
    const cur = into.get(k);
    if (cur === undefined || v > cur) into.set(k, v);
  }
}

function lastOffsets(
  meta: RecordMetadata[],
  send: ReadonlyArray<{ topic: string; messages: OutRecord[] }>,
): WrittenOffsets {
  // The broker answers with the base offset of each partition's batch; count what we sent there.
  // Counted per partition number first: one `topic:partition` string per partition, not per record.
  const counts = new Map<string, number>();
  for (const { topic, messages: msgs } of send) {
    let per: number[] | undefined;
    for (const m of msgs) {
      const p = m.partition;
      if (p === undefined) continue;
      per ??= [];
      per[p] = (per[p] ?? 0) + 1;
    }
    if (per === undefined) continue;
    for (let p = 0; p < per.length; p++) {
      const n = per[p];
      if (n === undefined) continue;
      const k = `${topic}:${p}`;
      counts.set(k, (counts.get(k) ?? 0) + n);
    }
  }
  const out: WrittenOffsets = new Map();
  for (const r of meta) {
    const k = `${r.topicName}:${r.partition}`;
    const n = counts.get(k);
    if (n !== undefined && r.baseOffset !== undefined) out.set(k, BigInt(r.baseOffset) + BigInt(n) - 1n);
  }
  return out;
}

/**
 * Broker errors that mean "another producer with this transactional id took over": the epoch
 * was bumped by a newer InitProducerId (INVALID_PRODUCER_EPOCH 47, PRODUCER_FENCED 90, which
 * kafkajs 2.2.4 does not name), or the transactional id's producer id mapping is gone
 * (INVALID_PRODUCER_ID_MAPPING 49: it expired, or a newer owner's fence replaced it). Kafka
 * Streams turns all three into TaskMigratedException. kafkajs wraps broker errors (a
 * non-retriable or an exhausted retry) with the original as `cause`, so the chain is walked.
 */
const FENCED_TYPES = new Set(['INVALID_PRODUCER_EPOCH', 'PRODUCER_FENCED', 'INVALID_PRODUCER_ID_MAPPING']);
const FENCED_CODES = new Set([47, 49, 90]);

export function isFencedError(e: unknown): boolean {
  return someInChain(
    e,
    (x) =>
      (typeof x.type === 'string' && FENCED_TYPES.has(x.type)) ||
      (typeof x.code === 'number' && FENCED_CODES.has(x.code)),
  );
}

/** An idempotent producer for at-least-once: send, wait for acks=all. */
export class PlainProducer {
  readonly #p: Producer;
  constructor(p: Producer) {
    this.#p = p;
  }
  async send(records: TopicRecords): Promise<WrittenOffsets> {
    const written: WrittenOffsets = new Map();
    for (const topicMessages of toSends(records)) {
      const meta = await this.#p.sendBatch({ topicMessages, acks: -1, compression: CompressionTypes.None });
      mergeMax(written, lastOffsets(meta, topicMessages));
    }
    return written;
  }
  async close(): Promise<void> {
    await this.#p.disconnect();
  }
}

type Any = any;

/** kafkajs's coordinator types (FindCoordinator). */
const COORDINATOR_GROUP = 0;
const COORDINATOR_TRANSACTION = 1;

/**
 * How long a transaction begun ahead of its checkpoint waits for one before it is aborted: a
 * task that went idle must not hold it open to the coordinator's transaction timeout (60 s,
 * client.ts), past which the coordinator aborts it and fences this producer.
 */
export const PREPARED_IDLE_MS = 10_000;

/**
 * Commit intervals up to which the next transaction is begun ahead ({@link
 * TransactionalProducer}): with longer ones its round trips are a small part of the wait, and a
 * transaction open for most of a long interval would near the coordinator's timeout.
 */
export const PREPARE_MAX_INTERVAL_MS = 5000;

/** How long {@link TransactionalProducer.close} waits for a prepared transaction's abort. */
const CLOSE_ABORT_MS = 2000;

/** Tries of a TxnOffsetCommit sent alone (50 ms of wait, doubling: about 1.5 s). */
const TXN_OFFSET_COMMIT_ATTEMPTS = 6;

/**
 * The errors kafkajs's sendOffsets retries its TxnOffsetCommit on (the group is still loading), and
 * CONCURRENT_TRANSACTIONS (the broker checks the transaction with its coordinator first).
 */
function offsetCommitRetriable(e: unknown): boolean {
  if (isConcurrentTransactions(e)) return true;
  return someInChain(
    e,
    (x) =>
      x.type === 'COORDINATOR_LOAD_IN_PROGRESS' ||
      x.type === 'UNKNOWN_TOPIC_OR_PARTITION' ||
      x.code === 14 ||
      x.code === 3,
  );
}

/** A transaction begun ahead of its checkpoint: `error` when adding its partitions or offsets failed. */
interface PreparedTx {
  tx: Transaction | undefined;
  groupId: string | undefined;
  error?: unknown;
}

interface Prepared {
  ready: Promise<PreparedTx>;
  timer: NodeJS.Timeout;
}

/** Calls `fn` with the transaction's cluster and transaction manager (send-messages.ts). */
async function internals(tx: Transaction, fn: (i: TxnInternals) => Promise<void>): Promise<void> {
  const messages = [] as unknown as OutRecord[] & { [TXN_INTERNALS]?: (i: TxnInternals) => Promise<void> };
  messages[TXN_INTERNALS] = fn;
  await tx.sendBatch({ topicMessages: [{ topic: 'sluice-internals', messages }], acks: -1 });
}

/** Offsets per topic, as TxnOffsetCommit takes them. */
function offsetTopics(offsets: readonly TopicPartitionOffset[]) {
  const byTopic = new Map<string, Array<{ partition: number; offset: string; metadata?: string | null }>>();
  for (const o of offsets) {
    let l = byTopic.get(o.topic);
    if (!l) byTopic.set(o.topic, (l = []));
    l.push({ partition: o.partition, offset: o.offset, metadata: o.metadata ?? null });
  }
  return [...byTopic].map(([topic, partitions]) => ({ topic, partitions }));
}

/**
 * A transactional producer owned by one task. One checkpoint = one transaction: outputs and
 * changelog records, and the input offsets once the records' partitions are in the transaction
 * (while the last records are still produced), then commit.
 */
export class TransactionalProducer {
  readonly id: string;
  readonly #p: Producer;
  #tx: Transaction | undefined;
  /** How long a prepared transaction waits for its checkpoint; 0: none is prepared. */
  readonly #preparedIdleMs: number;
  /**
   * `commitIntervalMs`: the app's (a prepared transaction waits three intervals, at least
   * {@link PREPARED_IDLE_MS}; none is prepared past {@link PREPARE_MAX_INTERVAL_MS}).
   * `preparedIdleMs`: that wait, for tests.
   */
  constructor(p: Producer, id: string, opts: { commitIntervalMs?: number; preparedIdleMs?: number } = {}) {
    this.#p = p;
    this.id = id;
    const interval = opts.commitIntervalMs ?? 0;
    this.#preparedIdleMs =
      opts.preparedIdleMs ??
      (interval > PREPARE_MAX_INTERVAL_MS ? 0 : Math.max(PREPARED_IDLE_MS, 3 * interval));
  }

  /**
   * The fence: InitProducerId **with the transactional id**. The coordinator bumps the epoch, so
   * every earlier producer of this id (a zombie that still thinks it owns the task) is refused
   * from now on, and it aborts (or waits out) that producer's open transaction before answering
   * (kafkajs retries CONCURRENT_TRANSACTIONS until then). Once this returns, no transaction of a
   * previous owner can commit, so what the task reads next (changelog ends, committed offsets)
   * is final.
   *
   * kafkajs's `connect()` does not do this: it runs InitProducerId through its idempotent,
   * non-transactional manager, without the transactional id. Its transactional manager sends
   * InitProducerId on the first `transaction()`; an empty transaction ended at once sends no
   * EndTxn (nothing was added to it), so this costs one round trip to the transaction
   * coordinator and leaves the producer ready, with the new epoch, for the first checkpoint.
   */
  async fence(): Promise<void> {
    const tx = await this.#p.transaction();
    await tx.abort();
  }

  /** Rejects the transaction in flight at once (set while one is). */
  #abandon: ((e: Error) => void) | undefined;
  /** The next checkpoint's transaction, begun ahead of it ({@link #prepare}). */
  #prepared: Prepared | undefined;
  /** A prepared transaction that waited too long, being aborted. */
  #ending: Promise<void> | undefined;

  /**
   * Sends records and offsets in one transaction and commits it. Throws if anything fails, and
   * at once when {@link close} is called meanwhile: kafkajs retries some errors for a long time
   * (AddPartitionsToTxn for a deleted topic: UNKNOWN_TOPIC_OR_PARTITION), and a task resetting or
   * closing must not wait for that.
   *
   * The transaction was usually begun after the previous commit ({@link #prepare}), its
   * partitions and the group's offsets already in it: then the records are produced while the
   * offsets go (TxnOffsetCommit), and the commit follows both, two round trips instead of four
   * (AddPartitionsToTxn; Produce while AddOffsetsToTxn then TxnOffsetCommit; EndTxn). Issue 19.
   */
  async commitTransaction(
    records: TopicRecords,
    offsets: { groupId: string; offsets: readonly TopicPartitionOffset[] },
  ): Promise<WrittenOffsets> {
    const abandoned = new Promise<never>((_, reject) => {
      this.#abandon = reject;
    });
    // Only a race below rejects through it; a transaction that ends first leaves it pending.
    abandoned.catch(() => undefined);
    const step = <T>(p: Promise<T>): Promise<T> => Promise.race([p, abandoned]);
    let pre: { tx: Transaction; groupId: string | undefined } | undefined;
    let tx: Transaction;
    try {
      if (this.#ending !== undefined) await step(this.#ending);
      pre = await step(this.#takePrepared());
      tx = pre?.tx ?? (await step(this.#p.transaction()));
    } catch (e) {
      this.#abandon = undefined;
      throw e;
    }
    this.#tx = tx;
    const written: WrittenOffsets = new Map();
    try {
      const sends = toSends(records);
      if (pre?.groupId !== undefined && pre.groupId === offsets.groupId) {
        // The offsets partition is in the transaction: the offsets go while the records do.
        const sending = (async () => {
          for (const topicMessages of sends) {
            const meta = await step(
              tx.sendBatch({ topicMessages, acks: -1, compression: CompressionTypes.None }),
            );
            mergeMax(written, lastOffsets(meta, topicMessages));
          }
        })();
        const sent = offsets.offsets.length > 0 ? this.#txnOffsetCommit(tx, offsets, step) : undefined;
        // Both settle before an abort (none of this transaction's requests still in flight).
        const [a, b] = await Promise.allSettled([sending, sent]);
        if (a.status === 'rejected') throw a.reason;
        if (b.status === 'rejected') throw b.reason;
        await step(tx.commit());
        this.#prepare(offsets);
        return written;
      }
      const last = offsets.offsets.length > 0 ? sends.pop() : undefined;
      for (const topicMessages of sends) {
        const meta = await step(
          tx.sendBatch({ topicMessages, acks: -1, compression: CompressionTypes.None }),
        );
        mergeMax(written, lastOffsets(meta, topicMessages));
      }
      if (last === undefined) {
        if (offsets.offsets.length > 0) await step(this.#sendOffsets(tx, offsets, step));
      } else {
        // The last send and the offsets overlap: the offsets go as soon as the send's partitions
        // are in the transaction (ON_PARTITIONS_ADDED, send-messages.ts), while its records are
        // produced; the commit waits for both. Saves the Produce round trip, or the two of the
        // offsets (AddOffsetsToTxn, TxnOffsetCommit), on the way to the commit.
        let partitionsAdded!: () => void;
        const added = new Promise<void>((r) => {
          partitionsAdded = r;
        });
        (last[0]!.messages as OutRecord[] & { [ON_PARTITIONS_ADDED]?: () => void })[ON_PARTITIONS_ADDED] =
          partitionsAdded;
        const produced = step(
          tx.sendBatch({ topicMessages: last, acks: -1, compression: CompressionTypes.None }),
        );
        produced.catch(() => undefined);
        // A send that fails before its partitions are added ends the wait too (it throws below).
        await Promise.race([
          added,
          produced.then(
            () => undefined,
            () => undefined,
          ),
        ]);
        const sent = this.#sendOffsets(tx, offsets, step);
        sent.catch(() => undefined);
        // Both settle before an abort (none of this transaction's requests still in flight).
        const [meta, off] = await Promise.allSettled([produced, sent]);
        if (meta.status === 'rejected') throw meta.reason;
        if (off.status === 'rejected') throw off.reason;
        mergeMax(written, lastOffsets(meta.value, last));
      }
      await step(tx.commit());
      this.#prepare(offsets);
      return written;
    } catch (e) {
      const gaveUp = this.#abandon === undefined;
      // The caller throws this producer away either way (a failed abort can leave kafkajs stuck
      // in ABORTING, kafkajs #469/#1355); try to abort so the next owner need not wait it out.
      // An abandoned transaction is not waited for: the next owner's fence aborts it.
      if (gaveUp) void tx.abort().catch(() => undefined);
      else await tx.abort().catch(() => undefined);
      throw e;
    } finally {
      this.#tx = undefined;
      this.#abandon = undefined;
    }
  }

  /**
   * Begins the next checkpoint's transaction now, off the way of its outputs: the partitions this
   * one wrote (AddPartitionsToTxn) and the group's offsets partition (AddOffsetsToTxn) join it, so
   * the next commit needs only Produce while TxnOffsetCommit, then EndTxn. Adding partitions holds
   * nothing back (a partition's last stable offset waits only for records written in an open
   * transaction). A partition added but not written then gets the commit's marker alone. A
   * transaction no checkpoint takes within {@link PREPARED_IDLE_MS} (the task went idle) is
   * aborted, far within the coordinator's transaction timeout (60 s), which would fence us.
   */
  #prepare(offsets: { groupId: string; offsets: readonly TopicPartitionOffset[] }): void {
    // Closed meanwhile, or a commit interval too long for it.
    if (this.#abandon === undefined || this.#preparedIdleMs === 0) return;
    const groupId = offsets.offsets.length > 0 ? offsets.groupId : undefined;
    const ready = (async (): Promise<PreparedTx> => {
      let tx: Transaction | undefined;
      /** The group whose offsets partition is in the transaction, once it is. */
      let offsetsIn: string | undefined;
      try {
        tx = await this.#p.transaction();
        await internals(tx, async ({ cluster, eosManager }) => {
          const topicData = takeWrittenPartitions(eosManager);
          // kafkajs ends a transaction (EndTxn, an abort too) only when partitions were added to
          // it: offsets alone would stay open at the coordinator until its timeout fenced us.
          if (topicData.length === 0) return;
          await retryConcurrentTransactions(
            () => eosManager.addPartitionsToTransaction(topicData),
            CONCURRENT_TRANSACTIONS_ATTEMPTS,
          );
          if (groupId === undefined) return;
          const transactionalId = eosManager.getTransactionalId();
          await retryConcurrentTransactions(async () => {
            const coordinator = await cluster.findGroupCoordinator({
              groupId: transactionalId,
              coordinatorType: COORDINATOR_TRANSACTION,
            });
            await coordinator.addOffsetsToTxn({
              transactionalId,
              producerId: eosManager.getProducerId(),
              producerEpoch: eosManager.getProducerEpoch(),
              groupId,
            });
          }, CONCURRENT_TRANSACTIONS_ATTEMPTS);
          offsetsIn = groupId;
        });
        return { tx, groupId: offsetsIn };
      } catch (error) {
        return { tx, groupId: offsetsIn, error };
      }
    })();
    const timer = setTimeout(() => {
      if (this.#prepared?.ready !== ready) return;
      this.#prepared = undefined;
      this.#ending = ready
        .then((r) => r.tx?.abort())
        .catch(() => undefined)
        .finally(() => {
          this.#ending = undefined;
        });
    }, this.#preparedIdleMs);
    timer.unref();
    this.#prepared = { ready, timer };
  }

  /**
   * The prepared transaction, if there is one and it is ready; one whose preparation failed is
   * aborted and the checkpoint begins its own (a fence is thrown: the task belongs to another).
   */
  async #takePrepared(): Promise<{ tx: Transaction; groupId: string | undefined } | undefined> {
    const pre = this.#prepared;
    if (pre === undefined) return undefined;
    this.#prepared = undefined;
    clearTimeout(pre.timer);
    const r = await pre.ready;
    if (r.error === undefined && r.tx !== undefined) return { tx: r.tx, groupId: r.groupId };
    if (isFencedError(r.error)) throw r.error;
    // A failed abort leaves kafkajs unable to begin another: the checkpoint fails, the task resets.
    if (r.tx !== undefined) await r.tx.abort();
    return undefined;
  }

  /** TxnOffsetCommit alone: the group's offsets partition is in the transaction already. */
  async #txnOffsetCommit(
    tx: Transaction,
    offsets: { groupId: string; offsets: readonly TopicPartitionOffset[] },
    step: <T>(p: Promise<T>) => Promise<T>,
  ): Promise<void> {
    const topics = offsetTopics(offsets.offsets);
    await internals(tx, async ({ cluster, eosManager }) => {
      for (let attempt = 1; ; attempt++) {
        try {
          const coordinator = await step(
            cluster.findGroupCoordinator({ groupId: offsets.groupId, coordinatorType: COORDINATOR_GROUP }),
          );
          await step(
            (coordinator as Any).txnOffsetCommit({
              transactionalId: eosManager.getTransactionalId(),
              producerId: eosManager.getProducerId(),
              producerEpoch: eosManager.getProducerEpoch(),
              groupId: offsets.groupId,
              topics,
            }),
          );
          return;
        } catch (e) {
          // As kafkajs's sendOffsets: a coordinator still loading is asked again (one that moved
          // is looked up anew by coordinator-cache.ts).
          if (attempt >= TXN_OFFSET_COMMIT_ATTEMPTS || !offsetCommitRetriable(e)) throw e;
          await step(sleep(50 * 2 ** (attempt - 1)));
        }
      }
    });
  }

  /** The input offsets into the transaction (AddOffsetsToTxn, then TxnOffsetCommit). */
  async #sendOffsets(
    tx: Transaction,
    offsets: { groupId: string; offsets: readonly TopicPartitionOffset[] },
    step: <T>(p: Promise<T>) => Promise<T>,
  ): Promise<void> {
    const topics = offsetTopics(offsets.offsets);
    // kafkajs's sendOffsets throws on CONCURRENT_TRANSACTIONS (AddOffsetsToTxn): that failed the
    // checkpoint and reset the task.
    await retryConcurrentTransactions(
      () => step(tx.sendOffsets({ consumerGroupId: offsets.groupId, topics })),
      CONCURRENT_TRANSACTIONS_ATTEMPTS,
      (ms) => step(sleep(ms)),
    );
  }

  get inTransaction(): boolean {
    return this.#tx !== undefined;
  }

  /** Disconnects; a transaction in flight fails at once (see {@link commitTransaction}). */
  async close(): Promise<void> {
    const abandon = this.#abandon;
    this.#abandon = undefined;
    abandon?.(new Error(`transactional producer ${this.id} closed while its transaction was in flight`));
    // A prepared transaction is aborted, so that the next owner's fence need not wait for it (that
    // fence aborts it anyway, if this does not get through).
    const pre = this.#prepared;
    this.#prepared = undefined;
    if (pre !== undefined) {
      clearTimeout(pre.timer);
      const aborted = pre.ready.then((r) => r.tx?.abort());
      await Promise.race([aborted, sleep(CLOSE_ABORT_MS)]).catch(() => undefined);
    }
    await this.#p.disconnect().catch(() => undefined);
  }
}
