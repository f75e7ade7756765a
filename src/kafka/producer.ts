import './kafkajs-preload.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { CompressionTypes, type Producer, type RecordMetadata, type Transaction } from 'kafkajs';
import { mayBeUnanswered, someInChain } from './error-chain.js';
import { producerCluster } from './kafkajs-patch.js';
import { partitionOfKey } from './partitioner.js';
import { BATCH_HEADER } from './record-batch.js';
import {
  CONCURRENT_TRANSACTIONS_ATTEMPTS,
  retryConcurrentTransactions,
  transactionalManagerOf,
} from './send-messages.js';
import type { ProducerIdentity } from './txn-group-metadata.js';
import type { OutRecord, TopicPartitionOffset } from './types.js';

export type TopicRecords = ReadonlyMap<string, OutRecord[]>;

/** Highest offset written per topic-partition by one send, from the broker's answer. */
export type WrittenOffsets = Map<string, bigint>;

/**
 * Bytes of one partition per send, at most (roughly). The broker refuses a record batch larger
 * than `message.max.bytes` (1 MiB by default) and kafkajs puts all of one partition's messages of
 * a send into one batch, so a partition's records go out in chunks of up to this size, the n-th
 * chunk of every partition in the n-th send. Partitions and topics do not add up: a checkpoint of
 * 900 KB spread over 8 partitions is one Produce request (issue 19: counted per topic, a
 * checkpoint at half load was 3 requests in a row, each a round trip through a busy event loop
 * on the way to the commit).
 */
export const MAX_SEND_BYTES = 512 * 1024;
/** The most a record's timestamp and offset deltas (varints) can grow when its batch is rebased. */
const REBASE_GROWTH = 13;
/** Bytes of one send, all partitions and topics together, at most (roughly). */
const MAX_REQUEST_BYTES = 16 * 1024 * 1024;

function sizeOf(m: OutRecord): number {
  // Records written ahead by the collector: their bytes as one batch (under MAX_SEND_BYTES unless
  // one record is larger; two builders of a partition that fit one send together are merged).
  if (m.batch !== undefined) return m.batch.size;
  let n = 64 + (m.key?.length ?? 0) + (m.value?.length ?? 0);
  if (m.headers)
    for (const [k, v] of Object.entries(m.headers))
      n += k.length + (typeof v === 'string' ? v.length * 3 : Buffer.isBuffer(v) ? v.length : 64);
  return n;
}

/** A topic's partition count as the producer's metadata knows it, or undefined. */
export type PartitionsOf = (topic: string) => number | undefined;

/**
 * The records as a list of sends, each holding at most about MAX_SEND_BYTES of each partition.
 * A topic of more than that is split by partition when every record's partition is known: its
 * own, or its key's hash over `partitionsOf(topic)` partitions, which is then set on the record so
 * that kafkajs sends it where it was counted. Otherwise (a keyless record, which goes round robin,
 * or no metadata) the whole topic counts as one partition. A partition's records keep their order
 * across sends (the n-th chunk goes before the n+1-th). A send holds at most about
 * MAX_REQUEST_BYTES of all topics together.
 */
export function toSends(
  records: TopicRecords,
  partitionsOf: PartitionsOf = () => undefined,
  /** Topics' `max.message.bytes`: a partition's bytes in one send stay under it (one batch). */
  limits?: ReadonlyMap<string, number>,
): Array<Array<{ topic: string; messages: OutRecord[] }>> {
  const sends: Array<Array<{ topic: string; messages: OutRecord[] }>> = [];
  /** Bytes per send, all topics: a request stays far under the broker's socket.request.max.bytes. */
  const sendBytes: number[] = [];
  /** The first send from `i` on with room for `sz` more bytes (an empty one always has). */
  const roomFrom = (i: number, sz: number) => {
    while ((sendBytes[i] ?? 0) > 0 && sendBytes[i]! + sz > MAX_REQUEST_BYTES) i++;
    return i;
  };
  const into = (i: number, topic: string, m: OutRecord, sz: number) => {
    const send = (sends[i] ??= []);
    sendBytes[i] = (sendBytes[i] ?? 0) + sz;
    const last = send[send.length - 1];
    if (last?.topic === topic) last.messages.push(m);
    else send.push({ topic, messages: [m] });
  };
  for (const [topic, messages] of records) {
    const limit = limits?.get(topic);
    const cap = limit === undefined ? MAX_SEND_BYTES : Math.min(MAX_SEND_BYTES, limit - 2 * BATCH_HEADER);
    // Under a topic's own bound, a builder counts what merging it into another of its partition
    // may add (each record's two deltas rewritten: up to REBASE_GROWTH bytes more).
    const growth = cap < MAX_SEND_BYTES ? REBASE_GROWTH : 0;
    const sizes = new Array<number>(messages.length);
    let total = 0;
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i]!;
      total += sizes[i] = sizeOf(m) + (m.batch === undefined ? 0 : growth * m.batch.count);
    }
    if (messages.length === 0) continue;
    if (total <= cap) {
      const i = roomFrom(0, total);
      (sends[i] ??= []).push({ topic, messages });
      sendBytes[i] = (sendBytes[i] ?? 0) + total;
      continue;
    }
    const n = partitionsOf(topic);
    const byPartition =
      n !== undefined && n > 0 && messages.every((m) => m.partition !== undefined || m.key != null);
    // Per partition + 1 (0: the whole topic), the send it fills now and its bytes there. A
    // partition's send only moves forward, so its records keep their order.
    const sendOf: number[] = [];
    const bytesIn: number[] = [];
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i]!;
      let slot = 0;
      if (byPartition) {
        m.partition ??= partitionOfKey(m.key!, n!);
        slot = m.partition + 1;
      }
      const sz = sizes[i]!;
      let send = sendOf[slot] ?? 0;
      let bytes = bytesIn[slot] ?? 0;
      if (bytes > 0 && bytes + sz > cap) {
        send++;
        bytes = 0;
      }
      const room = roomFrom(send, sz);
      if (room !== send) {
        send = room;
        bytes = 0;
      }
      sendOf[slot] = send;
      bytesIn[slot] = bytes + sz;
      into(send, topic, m, sz);
    }
  }
  return sends;
}

/**
 * Where a committed transaction's time went, in seconds from the commit's start: `begin` until the
 * transaction was ready (begun ahead: usually 0), `produce` until the last Produce was answered,
 * `offsets` until the TxnOffsetCommit was (pipelined beside the records, so it overlaps them),
 * `end` for the EndTxn round trip; `requests` = the Produce requests it took, one after the other.
 */
export interface TransactionPhases {
  begin: number;
  produce: number;
  /** Undefined when the transaction held no offsets. */
  offsets: number | undefined;
  end: number;
  requests: number;
}

/** Partition counts from a kafkajs producer's metadata (undefined until it has loaded the topic's). */
function partitionsOfProducer(p: Producer): PartitionsOf {
  return (topic) => {
    const cluster = producerCluster(p) as { findTopicPartitionMetadata?(t: string): unknown[] } | undefined;
    try {
      const n = cluster?.findTopicPartitionMetadata?.(topic).length;
      return n !== undefined && n > 0 ? n : undefined;
    } catch {
      return undefined; // not loaded yet: the topic counts as one partition
    }
  };
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
      per[p] = (per[p] ?? 0) + (m.batch === undefined ? 1 : m.batch.count);
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
export const isFencedError = brokerErrorIn(
  ['INVALID_PRODUCER_EPOCH', 'PRODUCER_FENCED', 'INVALID_PRODUCER_ID_MAPPING'],
  [47, 49, 90],
);

/**
 * Broker errors of an exactly-once v2 TxnOffsetCommit (KIP-447) that mean "this member is no
 * longer in the group's current generation": ILLEGAL_GENERATION 22, UNKNOWN_MEMBER_ID 25,
 * FENCED_INSTANCE_ID 82. The group moved the worker's tasks (it was frozen past its session, or
 * a rebalance overtook the commit): Kafka Streams turns them into TaskMigratedException too.
 */
export const isGenerationFenced = brokerErrorIn(
  ['ILLEGAL_GENERATION', 'UNKNOWN_MEMBER_ID', 'FENCED_INSTANCE_ID'],
  [22, 25, 82],
);

/** Whether an error, or one it wraps, is a broker error of one of these types or codes. */
function brokerErrorIn(types: readonly string[], codes: readonly number[]): (e: unknown) => boolean {
  const t = new Set(types);
  const c = new Set(codes);
  return (e) =>
    someInChain(
      e,
      (x) => (typeof x.type === 'string' && t.has(x.type)) || (typeof x.code === 'number' && c.has(x.code)),
    );
}

/**
 * How long an at-least-once request waits for more sends while the worker is behind its input
 * (see {@link PlainProducer.send}): Kafka Streams' producers linger 100 ms always.
 */
export const BACKLOG_LINGER_MS = 50;

/** An idempotent producer for at-least-once: send, wait for acks=all. */
export class PlainProducer {
  /** The topics' `max.message.bytes` (the client's `recordLimits`): see {@link toSends}. */
  limits: ReadonlyMap<string, number> | undefined;
  readonly #p: Producer;
  readonly #partitionsOf: PartitionsOf;
  readonly #lingerMs: number;
  readonly #behind: (partitions: readonly string[]) => boolean;
  /**
   * `lingerMs`: how long a request waits for more sends after the first it holds (`kafka.lingerMs`);
   * at least {@link BACKLOG_LINGER_MS} while every send it holds comes from input partitions
   * that are `behind` (`topic:partition`, see {@link send}).
   */
  constructor(p: Producer, lingerMs = 0, behind: (partitions: readonly string[]) => boolean = () => false) {
    this.#p = p;
    this.#partitionsOf = partitionsOfProducer(p);
    this.#lingerMs = lingerMs;
    this.#behind = behind;
  }
  /** A topic's partition count as this producer's metadata knows it (the collector's partitioning). */
  partitionsOf(topic: string): number | undefined {
    return this.#partitionsOf(topic);
  }
  /** Sends waiting for the one in flight: they go together when it is answered and the linger is up. */
  #waiting: Array<{
    records: TopicRecords;
    resolve: (w: WrittenOffsets) => void;
    reject: (e: unknown) => void;
    /** When it was asked for (performance.now()). */
    at: number;
    /** Its input partitions are behind: it may wait {@link BACKLOG_LINGER_MS}. */
    patient: boolean;
  }> = [];
  #sending = false;
  #closed = false;

  /**
   * Sends the records (acks=all) and resolves with the last offset written per partition that
   * named its partition. The worker's tasks share this producer, and kafkajs sends an idempotent
   * producer's requests to a broker one at a time anyway: the sends asked for while one is in
   * flight go in one request after it (each caller's records in the order it gave them, and a
   * caller sends its next only once this one is answered); a request waits `lingerMs` after its
   * first send was asked for, as Kafka's producer's linger.ms. Sends that give `from` (a task's
   * input partitions, for its outputs sent early) while those are a second or more behind (a
   * backlog after a pause, a restart, a burst: InputRateMeter.behind) may wait at least
   * {@link BACKLOG_LINGER_MS} when every send of the request may: their records waited anyway,
   * and fewer, larger requests cost less CPU per record, so the backlog drains sooner (`filter` +
   * `map` from a backlog of 1M records: about 80 requests instead of 390, CPU per record 0.94×,
   * rate 1.08×; CHANGELOG, 12-07). A caught-up task's send, or a checkpoint's (no `from`), keeps
   * the request to `lingerMs`. If that request fails, each caller's
   * records go again alone, so one task's bad records (a topic gone, a record too large) fail
   * only that task's send. At-least-once sends each task's outputs after each batch
   * (output-stream.ts): one request per task and batch cost filter + map about a third more CPU
   * per record than exactly-once.
   */
  send(records: TopicRecords, from?: readonly string[]): Promise<WrittenOffsets> {
    if (this.#closed) return Promise.reject(new Error('the producer is closed'));
    const patient = from !== undefined && this.#behind(from);
    return new Promise((resolve, reject) => {
      this.#waiting.push({ records, resolve, reject, at: performance.now(), patient });
      if (!patient) this.#wake?.();
      if (!this.#sending) void this.#drain();
    });
  }

  /** Cuts the current linger short (a send that may not wait long came). */
  #wake: (() => void) | undefined;

  /** How long the request still waits: 0 once its linger is up (or nothing waits). */
  #lingerLeft(): number {
    const first = this.#waiting[0];
    if (first === undefined) return 0;
    const patient = this.#waiting.every((w) => w.patient);
    const lingerMs = patient ? Math.max(this.#lingerMs, BACKLOG_LINGER_MS) : this.#lingerMs;
    return lingerMs - (performance.now() - first.at);
  }

  async #drain(): Promise<void> {
    this.#sending = true;
    try {
      while (this.#waiting.length > 0) {
        // As Kafka's producer's linger.ms: the request waits for more, from its first send's ask.
        // Until the linger is up; a send that may not wait long, arriving meanwhile, cuts it short.
        for (let linger = this.#lingerLeft(); linger > 0; linger = this.#lingerLeft())
          await new Promise<void>((woken) => {
            const t = setTimeout(woken, linger);
            this.#wake = () => {
              clearTimeout(t);
              woken();
            };
          });
        this.#wake = undefined;
        const group = this.#waiting.splice(0);
        if (group.length === 0) continue; // closed meanwhile
        if (group.length === 1) {
          await this.#sendNow(group[0]!.records).then(group[0]!.resolve, group[0]!.reject);
          continue;
        }
        const records = new Map<string, OutRecord[]>();
        for (const g of group)
          for (const [topic, l] of g.records) {
            const into = records.get(topic);
            records.set(topic, into === undefined ? l : into.concat(l));
          }
        try {
          const written = await this.#sendNow(records);
          for (const g of group) g.resolve(written);
        } catch {
          // Each alone, in the order they came (records of the failed request that were written
          // go again: at-least-once allows it, and no caller has a later send waiting).
          for (const g of group) await this.#sendNow(g.records).then(g.resolve, g.reject);
        }
      }
    } finally {
      this.#sending = false;
    }
  }

  async #sendNow(records: TopicRecords): Promise<WrittenOffsets> {
    const written: WrittenOffsets = new Map();
    for (const topicMessages of toSends(records, this.#partitionsOf, this.limits)) {
      const meta = await this.#p.sendBatch({ topicMessages, acks: -1, compression: CompressionTypes.None });
      mergeMax(written, lastOffsets(meta, topicMessages));
    }
    return written;
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const g of this.#waiting.splice(0)) g.reject(new Error('the producer is closed'));
    this.#wake?.();
    await this.#p.disconnect();
  }
}

/**
 * A transactional producer owned by one task. One checkpoint = one transaction: outputs and
 * changelog records, and the input offsets beside them, then commit.
 */
export class TransactionalProducer {
  /** The topics' `max.message.bytes` (the client's `recordLimits`): see {@link toSends}. */
  limits: ReadonlyMap<string, number> | undefined;
  readonly id: string;
  readonly #p: Producer;
  /** The transaction timeout the producer was made with (`transaction.timeout.ms`). */
  readonly timeoutMs: number;
  readonly #partitionsOf: PartitionsOf;
  /** Told where each committed transaction's time went (the worker's metrics). */
  onCommitted: ((phases: TransactionPhases) => void) | undefined;
  constructor(p: Producer, id: string, timeoutMs = TRANSACTION_TIMEOUT_MS) {
    this.#p = p;
    this.#partitionsOf = partitionsOfProducer(p);
    this.id = id;
    this.timeoutMs = timeoutMs;
  }

  /** A topic's partition count as this producer's metadata knows it (the collector's partitioning). */
  partitionsOf(topic: string): number | undefined {
    return this.#partitionsOf(topic);
  }

  /** This producer's id and epoch (its InitProducerId's answer), once it has them. */
  identity(): ProducerIdentity | undefined {
    const cluster: Any = producerCluster(this.#p);
    const eos: Any = cluster === undefined ? undefined : transactionalManagerOf(cluster);
    const producerId = eos?.getProducerId?.();
    const epoch = eos?.getProducerEpoch?.();
    // kafkajs holds -1 until InitProducerId answered.
    if (producerId == null || Number(producerId) < 0 || typeof epoch !== 'number' || epoch < 0)
      return undefined;
    return { producerId: String(producerId), epoch };
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
  /** The next transaction, begun ahead of its checkpoint ({@link begin}). */
  #ahead: Ahead | undefined;
  /** What the last committed transaction wrote to: the partitions and the offsets' group. */
  #last: Participants | undefined;
  #closed = false;
  /** From the start of {@link commitTransaction} to its end. */
  #committing = false;

  /**
   * Begins the next transaction now, ahead of the checkpoint that will commit it: AddPartitionsToTxn
   * for the partitions the last transaction wrote to and AddOffsetsToTxn for its group, pipelined.
   * A checkpoint is then its Produce with its TxnOffsetCommit, and EndTxn: two steps on the way to
   * the commit instead of three (issue 19), each a round trip and a wait for the event loop. The
   * Java producer likewise adds a partition to the transaction as soon as a record for it is
   * queued, long before the commit.
   *
   * The task calls this when it has processed records, so a checkpoint follows within the commit
   * interval (`commitIntervalMs`). The coordinator aborts a transaction open longer than
   * its {@link timeoutMs}, which fences this producer, so nothing begins ahead when the
   * interval is over a third of that. A partition of the checkpoint that was not added here is
   * added by the send as before; one added here and not written to gets a marker and nothing
   * else. An Add request that fails other than by a fence leaves the checkpoint to send it again
   * (the old way). Not before the first commit (nothing to add yet), not while a checkpoint is in
   * flight (one transaction at a time), not after {@link close}.
   */
  begin(commitIntervalMs: number): void {
    if (this.#ahead !== undefined || this.#committing || this.#closed || this.#last === undefined) return;
    if (commitIntervalMs > this.timeoutMs / 3) return;
    const cluster: Any = producerCluster(this.#p);
    const eos: Any = cluster === undefined ? undefined : transactionalManagerOf(cluster);
    if (eos === undefined) return;
    const last = this.#last;
    // A closed producer stops retrying (its cluster is disconnected).
    const wait = (ms: number) =>
      this.#closed ? Promise.reject(new Error(`producer ${this.id} closed`)) : sleep(ms);
    const ready = (async (): Promise<Begun> => {
      const tx = await this.#p.transaction();
      const added: Array<Promise<unknown>> = [
        retryConcurrentTransactions(
          () => eos.addPartitionsToTransaction(last.topics),
          CONCURRENT_TRANSACTIONS_ATTEMPTS,
          wait,
        ),
      ];
      if (last.groupId !== undefined) {
        const groupId = last.groupId;
        added.push(
          retryConcurrentTransactions(
            async () => {
              const coordinator = await cluster.findGroupCoordinator({
                groupId: this.id,
                coordinatorType: TRANSACTION_COORDINATOR,
              });
              await coordinator.addOffsetsToTxn({
                transactionalId: this.id,
                producerId: eos.getProducerId(),
                producerEpoch: eos.getProducerEpoch(),
                groupId,
              });
            },
            CONCURRENT_TRANSACTIONS_ATTEMPTS,
            wait,
          ),
        );
      }
      // Both settle before the checkpoint goes on (none of its requests still in flight).
      const settled = await Promise.allSettled(added);
      const failed = settled.find((r) => r.status === 'rejected') as PromiseRejectedResult | undefined;
      if (failed === undefined) return { tx, offsets: last.groupId };
      // A fence fails the checkpoint. Anything else (a timeout, a lost connection) is left to it:
      // kafkajs marked what was answered, the send adds the rest and the offsets go the old way.
      if (isFencedError(failed.reason)) throw failed.reason;
      return { tx, offsets: undefined };
    })();
    // A checkpoint awaits it and meets its error; until then (or without one) it is not unhandled.
    ready.catch(() => undefined);
    this.#ahead = { ready, cluster, eos };
  }

  /**
   * Gives up a transaction begun ahead, if any (aborted once its Add requests are answered): no
   * checkpoint follows soon (the worker rejoins its group), and one left open past the timeout
   * would be aborted by the coordinator, which fences this producer. The next one begins again.
   */
  dropAhead(): void {
    const ahead = this.#ahead;
    if (ahead === undefined || this.#committing) return;
    this.#ahead = undefined;
    void ahead.ready.then(({ tx }) => tx.abort()).catch(() => undefined);
  }

  /** Settles once a transaction begun ahead has its Add requests answered (for tests). */
  async whenBegun(): Promise<void> {
    await this.#ahead?.ready.catch(() => undefined);
  }

  /** True while a transaction begun ahead waits for its checkpoint. */
  get begun(): boolean {
    return this.#ahead !== undefined;
  }

  /**
   * Sends records and offsets in one transaction and commits it. Throws if anything fails, and
   * at once when {@link close} is called meanwhile: kafkajs retries some errors for a long time
   * (AddPartitionsToTxn for a deleted topic: UNKNOWN_TOPIC_OR_PARTITION), and a task resetting or
   * closing must not wait for that. The transaction is the one {@link begin} started, if any.
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
    const t0 = performance.now();
    const ahead = this.#ahead;
    this.#ahead = undefined;
    this.#committing = true;
    // A transaction begun ahead that failed leaves kafkajs mid-transaction: the caller throws this
    // producer away, as after any failed checkpoint.
    let tx: Transaction;
    /** The group whose AddOffsetsToTxn the transaction begun ahead had answered. */
    let offsetsAdded: string | undefined;
    try {
      if (ahead) ({ tx, offsets: offsetsAdded } = await step(ahead.ready));
      else tx = await step(this.#p.transaction());
    } catch (e) {
      this.#committing = false;
      this.#abandon = undefined;
      this.#last = undefined; // nothing more begins on a producer the caller throws away
      throw e;
    }
    const ready = performance.now();
    const written: WrittenOffsets = new Map();
    /** The partitions the sends wrote to, from the broker's answers (most outputs carry no partition). */
    const wrote: RecordMetadata[] = [];
    /** Why the records' and the offsets' chains failed, once both settled. */
    let failures: unknown[] = [];
    try {
      const sends = toSends(records, this.#partitionsOf, this.limits);
      // The offsets go at once, beside the records. kafkajs pipelines a connection's requests
      // (maxInFlightRequests, client.ts) and the broker handles them in order, one at a time: the
      // AddOffsetsToTxn follows the first AddPartitionsToTxn, and the TxnOffsetCommit the
      // Produce, without a round trip of their own. The commit waits for both. In a transaction
      // begun ahead, both Add requests are answered already.
      const sent =
        offsets.offsets.length === 0
          ? Promise.resolve()
          : ahead !== undefined && offsetsAdded === offsets.groupId
            ? this.#commitOffsets(ahead, tx, offsets, step)
            : this.#sendOffsets(tx, offsets, step);
      sent.catch(() => undefined);
      let offsetsAt = ready;
      let producedAt = ready;
      if (offsets.offsets.length > 0)
        sent.then(
          () => void (offsetsAt = performance.now()),
          () => undefined,
        );
      const sending = (async () => {
        for (const topicMessages of sends) {
          const meta = await step(
            tx.sendBatch({ topicMessages, acks: -1, compression: CompressionTypes.None }),
          );
          mergeMax(written, lastOffsets(meta, topicMessages));
          for (const m of meta) wrote.push(m);
        }
        producedAt = performance.now();
      })();
      // Both settle before an abort (none of this transaction's requests still in flight).
      const [produced, committed] = await Promise.allSettled([sending, sent]);
      failures = [produced, committed].flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
      // The group's refusal first: it says the member lost its tasks (they close as migrated),
      // which a send failing in the same transaction (a fenced epoch, a leader gone) does not.
      const refused = failures.find(isGenerationFenced);
      if (refused !== undefined) throw refused;
      if (produced.status === 'rejected') throw produced.reason;
      if (committed.status === 'rejected') throw committed.reason;
      const ending = performance.now();
      await step(tx.commit());
      this.#last = participants(wrote, offsets);
      const phases: TransactionPhases = {
        begin: (ready - t0) / 1000,
        produce: (producedAt - t0) / 1000,
        offsets: offsets.offsets.length > 0 ? (offsetsAt - t0) / 1000 : undefined,
        end: (performance.now() - ending) / 1000,
        requests: sends.length,
      };
      try {
        this.onCommitted?.(phases);
      } catch {
        // Only metrics: the transaction committed whatever they do.
      }
      return written;
    } catch (e) {
      this.#last = undefined; // nothing more begins on a producer the caller throws away
      // The caller throws this producer away either way (a failed abort can leave kafkajs stuck
      // in ABORTING, kafkajs #469/#1355). It aborts, so that the next owner need not wait the
      // transaction out, only when every request of it was answered. A request the client gave up
      // on (a timeout, a lost connection, a transaction abandoned by close) may still be in the
      // broker's socket buffer: a broker frozen past the request timeout handles it when it
      // thaws, in any order with the requests of a new connection. An EndTxn(abort) of this epoch
      // handled first would write its markers before that Produce, whose records would then open
      // a transaction the coordinator does not know: a hanging transaction, which holds the
      // partition's last stable offset for good (Kafka's KIP-890; a restore then waits forever).
      // Without an abort here, the next owner's InitProducerId bumps the epoch and aborts with
      // markers of the new one, which the partition leader holds a late Produce of the old
      // epoch against (Kafka's Java producer likewise bumps the epoch after a timeout, KIP-588).
      const abandoned = this.#abandon === undefined;
      if (!abandoned && ![e, ...failures].some(mayBeUnanswered)) await tx.abort().catch(() => undefined);
      throw e;
    } finally {
      this.#abandon = undefined;
      this.#committing = false;
    }
  }

  /**
   * TxnOffsetCommit alone, in a transaction begun ahead (its AddOffsetsToTxn answered). A refusal
   * other than a fence (a coordinator that moved or is loading) goes the whole way again through
   * kafkajs, which finds the coordinator and retries.
   */
  async #commitOffsets(
    ahead: Ahead,
    tx: Transaction,
    offsets: { groupId: string; offsets: readonly TopicPartitionOffset[] },
    step: <T>(p: Promise<T>) => Promise<T>,
  ): Promise<void> {
    try {
      const coordinator: Any = await step(
        ahead.cluster.findGroupCoordinator({ groupId: offsets.groupId, coordinatorType: GROUP_COORDINATOR }),
      );
      await step(
        coordinator.txnOffsetCommit({
          transactionalId: this.id,
          groupId: offsets.groupId,
          producerId: ahead.eos.getProducerId(),
          producerEpoch: ahead.eos.getProducerEpoch(),
          topics: offsetTopics(offsets.offsets),
        }),
      );
    } catch (e) {
      if (isFencedError(e) || this.#abandon === undefined) throw e;
      await this.#sendOffsets(tx, offsets, step);
    }
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
    return this.#committing;
  }

  /**
   * Disconnects; a transaction in flight fails at once (see {@link commitTransaction}). One begun
   * ahead is aborted if it can be at once; else the next owner's fence aborts it.
   */
  async close(): Promise<void> {
    this.#closed = true;
    const ahead = this.#ahead;
    this.#ahead = undefined;
    // Bounded: its Add requests may be retrying (CONCURRENT_TRANSACTIONS) for seconds.
    if (ahead) {
      let late = false;
      await Promise.race([
        ahead.ready.then(({ tx }) => (late ? undefined : tx.abort())).catch(() => undefined),
        sleep(1000, undefined, { ref: false }),
      ]);
      late = true;
    }
    const abandon = this.#abandon;
    this.#abandon = undefined;
    abandon?.(new Error(`transactional producer ${this.id} closed while its transaction was in flight`));
    await this.#p.disconnect().catch(() => undefined);
  }
}

/**
 * How long the transaction coordinator lets a transaction stay open before it aborts it and bumps
 * the producer's epoch (the producer's `transaction.timeout.ms`; Kafka Streams sets 10 s).
 */
export const TRANSACTION_TIMEOUT_MS = 60_000;

/**
 * The same for a worker's one producer under exactly-once v2, as Kafka Streams': a new owner of a
 * task waits out a frozen or dead worker's open transaction (it holds the changelog's last stable
 * offset) for up to this long, since it cannot fence another worker's transactional id.
 */
export const WORKER_TRANSACTION_TIMEOUT_MS = 10_000;

/** kafkajs's coordinator types (protocol/coordinatorTypes.js). */
const GROUP_COORDINATOR = 0;
const TRANSACTION_COORDINATOR = 1;

// kafkajs's internals, as far as a transaction begun ahead uses them (send-messages.ts records them).
type Any = any;

/** A transaction begun ahead of its checkpoint (TransactionalProducer.begin). */
interface Ahead {
  /** The transaction, once its Add requests are answered. */
  ready: Promise<Begun>;
  /** The producer's kafkajs cluster and transactional manager. */
  cluster: Any;
  eos: Any;
}

interface Begun {
  tx: Transaction;
  /** The group whose AddOffsetsToTxn was answered, if any. */
  offsets: string | undefined;
}

/** What a committed transaction wrote to, in kafkajs's AddPartitionsToTxn form. */
interface Participants {
  topics: Array<{ topic: string; partitions: Array<{ partition: number }> }>;
  groupId: string | undefined;
}

function participants(
  wrote: readonly RecordMetadata[],
  offsets: { groupId: string; offsets: readonly TopicPartitionOffset[] },
): Participants | undefined {
  const byTopic = groupByTopic(
    wrote.filter(
      (m, i) => wrote.findIndex((x) => x.topicName === m.topicName && x.partition === m.partition) === i,
    ),
    (m) => m.topicName,
    (m) => ({ partition: m.partition }),
  );
  // Without a partition the transaction would not count as begun for kafkajs (no EndTxn).
  if (byTopic.size === 0) return undefined;
  return {
    topics: [...byTopic].map(([topic, partitions]) => ({ topic, partitions })),
    groupId: offsets.offsets.length > 0 ? offsets.groupId : undefined,
  };
}

/** Offsets in kafkajs's per-topic form (TxnOffsetCommit, sendOffsets). */
function offsetTopics(offsets: readonly TopicPartitionOffset[]): Array<{
  topic: string;
  partitions: Array<{ partition: number; offset: string; metadata: string | null }>;
}> {
  const byTopic = groupByTopic(
    offsets,
    (o) => o.topic,
    (o) => ({ partition: o.partition, offset: o.offset, metadata: o.metadata ?? null }),
  );
  return [...byTopic].map(([topic, partitions]) => ({ topic, partitions }));
}

/** `items` grouped by `topicOf`, each as `entry(item)`, in first-seen order. */
function groupByTopic<T, E>(
  items: readonly T[],
  topicOf: (x: T) => string,
  entry: (x: T) => E,
): Map<string, E[]> {
  const byTopic = new Map<string, E[]>();
  for (const x of items) {
    const topic = topicOf(x);
    let l = byTopic.get(topic);
    if (!l) byTopic.set(topic, (l = []));
    l.push(entry(x));
  }
  return byTopic;
}
