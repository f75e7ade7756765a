/**
 * The requests exactly-once v2 (KIP-447) needs, for kafkajs 2.2.4, installed at load time
 * (docs/plans/eos-v2.md, steps 2–4). kafkajs implements TxnOffsetCommit only up to v1 and
 * OffsetFetch up to v4, so its transactional offsets carry no group generation or member id: the
 * coordinator cannot tell a zombie's commit from the owner's, and each task needs a producer of
 * its own to be fenced (EOS v1). And a worker reading offsets at task start cannot ask the
 * coordinator to wait for a transaction that still holds offsets for its partitions. This module
 * changes, on kafkajs's `Broker.prototype`:
 *
 * - `txnOffsetCommit`: given `generationId` and `memberId` (and optionally `groupInstanceId`), it
 *   sends TxnOffsetCommit v3 (Kafka ≥ 2.5), whose member fields the coordinator checks against
 *   the group (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID). A broker without v3
 *   fails the call: a commit the coordinator does not fence must never pass for one it does.
 *   Without those fields it takes them from the pin of its transactional id
 *   (txn-group-metadata.ts: a worker's producer under exactly-once v2), so kafkajs's own
 *   `sendOffsets` sends v3 for it, and refuses one of another producer of a pinned id; for any
 *   other producer the call is kafkajs's own. v4 and later are not sent: v4 answers
 *   TRANSACTION_ABORTABLE (120, unknown to kafkajs) and v5 implies transactions v2, where kafkajs
 *   speaks EndTxn v1.
 * - `offsetFetchStable` (new): OffsetFetch v7 with `require_stable`, which answers a partition
 *   with UNSTABLE_OFFSET_COMMIT (88) while an open transaction holds offsets for it, instead of
 *   the offset committed before that transaction (what v0–v6 return). Per-partition errors are
 *   returned, so that the caller (`KafkaAdmin.committedOffsetsStable`) can wait for such a
 *   transaction to end.
 *
 * Both are flexible versions, which kafkajs's request header does not know: like kafkajs's own
 * AlterPartitionReassignments, the request body starts with the empty tag buffer of request
 * header v2, and the response decoder skips the tag buffer of response header v1.
 *
 * Patching `Broker.prototype` does not depend on when kafkajs loads; kafkajs-preload.ts imports
 * this module with the other patches, and {@link txnV3Installed} (checked by
 * `assertKafkajsPatched`) says whether it worked.
 */
import { createRequire } from 'node:module';
import { txnGroupMetadataFor } from './txn-group-metadata.js';
import type { GroupMetadata } from './types.js';

const require = createRequire(import.meta.url);

type Any = any;

/** TxnOffsetCommit's first version with the group's generation and member ids (and first flexible one). */
export const TXN_OFFSET_COMMIT_MEMBER_VERSION = 3;
/** OffsetFetch's first version with `require_stable`. */
export const OFFSET_FETCH_STABLE_VERSION = 7;
/** OffsetFetch v7's answer for a partition whose offsets an open transaction holds (retriable). */
export const UNSTABLE_OFFSET_COMMIT = 88;

/** What `Broker#txnOffsetCommit` takes (kafkajs's arguments; the member fields select v3). */
export interface TxnOffsetCommitArgs extends Partial<GroupMetadata> {
  transactionalId: string;
  groupId: string;
  producerId: string | number | bigint;
  producerEpoch: number;
  topics: ReadonlyArray<{
    topic: string;
    partitions: ReadonlyArray<{ partition: number; offset: string; metadata?: string | null }>;
  }>;
}

/** What `Broker#offsetFetchStable` takes. */
export interface OffsetFetchStableArgs {
  groupId: string;
  topics: ReadonlyArray<{ topic: string; partitions: ReadonlyArray<{ partition: number }> }>;
}

/** What `Broker#offsetFetchStable` answers: every partition asked for, each with its own error code. */
export interface OffsetFetchStableResult {
  responses: Array<{
    topic: string;
    partitions: Array<{
      partition: number;
      /** The committed offset (the next to read), `-1` where none. */
      offset: string;
      metadata: string | null;
      /** 0, or e.g. {@link UNSTABLE_OFFSET_COMMIT}. */
      errorCode: number;
    }>;
  }>;
}

/** A request as kafkajs's connection sends it. */
export interface KafkajsRequest {
  apiKey: number;
  apiVersion: number;
  apiName: string;
  encode: () => Promise<{ buffer: Buffer }>;
}

/** A response as kafkajs's connection reads it: `decode` the bytes after the correlation id, then `parse`. */
export interface KafkajsResponse<D, P> {
  decode: (raw: Buffer) => Promise<D>;
  parse: (data: D) => Promise<P>;
}

/**
 * Broker error codes kafkajs 2.2.4 does not know (its table stops at 88). PRODUCER_FENCED is what
 * Kafka ≥ 2.7 answers a transactional request of a fenced producer; Sluice tells fences by it
 * (producer.ts `isFencedError`).
 */
const UNKNOWN_TO_KAFKAJS: Record<number, { type: string; retriable: boolean; message: string }> = {
  90: {
    type: 'PRODUCER_FENCED',
    retriable: false,
    message: 'There is a newer producer with the same transactionalId which fences the current one',
  },
};

/**
 * kafkajs's error for a broker error code (`createErrorFromCode`: a KafkaJSProtocolError with
 * `type`, `code`, `retriable`), except that a code kafkajs does not know keeps its number as
 * `code` (kafkajs puts -99 there) and, where listed above, gets its Kafka name as `type`.
 */
export function protocolError(code: number): Error & { type: string; code: number; retriable: boolean } {
  const { createErrorFromCode } = require('kafkajs/src/protocol/error.js');
  const e = createErrorFromCode(code);
  if (e.code === code) return e;
  const { KafkaJSProtocolError } = require('kafkajs/src/errors.js');
  const known = UNKNOWN_TO_KAFKAJS[code];
  return new KafkaJSProtocolError(
    known === undefined ? { type: e.type, code, retriable: false, message: e.message } : { ...known, code },
  );
}

const codecs = () => ({
  Encoder: require('kafkajs/src/protocol/encoder.js'),
  Decoder: require('kafkajs/src/protocol/decoder.js'),
  apiKeys: require('kafkajs/src/protocol/requests/apiKeys.js'),
});

/** An empty tag buffer (no tagged fields): closes every struct of a flexible version. */
const noTags = (encoder: Any) => encoder.writeUVarInt(0);

/**
 * TxnOffsetCommit v3 (`TxnOffsetCommitRequest.json`): transactional_id group_id producer_id
 * producer_epoch generation_id member_id group_instance_id [topics: name [partitions:
 * partition_index committed_offset committed_leader_epoch committed_metadata]], strings and
 * arrays compact, each struct ending with its tag buffer. The leader epoch is -1 (unknown):
 * kafkajs does not track the epoch of the records it consumed.
 */
export function txnOffsetCommitV3Request(args: TxnOffsetCommitArgs & GroupMetadata): KafkajsRequest {
  const { Encoder, apiKeys } = codecs();
  const { transactionalId, groupId, producerId, producerEpoch, generationId, memberId, topics } = args;
  const encodePartition = (p: { partition: number; offset: string; metadata?: string | null }) =>
    noTags(
      new Encoder()
        .writeInt32(p.partition)
        .writeInt64(p.offset)
        .writeInt32(-1)
        .writeUVarIntString(p.metadata ?? null),
    );
  const encodeTopic = (t: TxnOffsetCommitArgs['topics'][number]) =>
    noTags(new Encoder().writeUVarIntString(t.topic).writeUVarIntArray(t.partitions.map(encodePartition)));
  return {
    apiKey: apiKeys.TxnOffsetCommit,
    apiVersion: TXN_OFFSET_COMMIT_MEMBER_VERSION,
    apiName: 'TxnOffsetCommit',
    encode: async () =>
      noTags(
        noTags(new Encoder()) // request header v2's tag buffer (kafkajs writes header v1)
          .writeUVarIntString(transactionalId)
          .writeUVarIntString(groupId)
          .writeInt64(producerId)
          .writeInt16(producerEpoch)
          .writeInt32(generationId)
          .writeUVarIntString(memberId)
          .writeUVarIntString(args.groupInstanceId ?? null)
          .writeUVarIntArray(topics.map(encodeTopic)),
      ),
  };
}

/** kafkajs's shape of a TxnOffsetCommit answer. */
export interface TxnOffsetCommitResult {
  throttleTime: number;
  clientSideThrottleTime: number;
  topics: Array<{ topic: string; partitions: Array<{ partition: number; errorCode: number }> }>;
}

/**
 * TxnOffsetCommit v3's answer (`TxnOffsetCommitResponse.json`): throttle_time_ms [topics: name
 * [partitions: partition_index error_code]]. Parsed as kafkajs parses v0–v1: the first
 * partition's error is thrown. The broker answers before it throttles (KIP-219), so the throttle
 * is the client's to apply, as in kafkajs's v1.
 */
export const txnOffsetCommitV3Response: KafkajsResponse<TxnOffsetCommitResult, TxnOffsetCommitResult> = {
  decode: async (raw) => {
    const { Decoder } = codecs();
    const d = new Decoder(raw);
    d.readTaggedFields(); // response header v1
    const throttle = d.readInt32();
    const topics =
      d.readUVarIntArray((t: Any) => {
        const topic = t.readUVarIntString();
        const partitions =
          t.readUVarIntArray((p: Any) => {
            const partition = { partition: p.readInt32(), errorCode: p.readInt16() };
            p.readTaggedFields();
            return partition;
          }) ?? [];
        t.readTaggedFields();
        return { topic, partitions };
      }) ?? [];
    d.readTaggedFields();
    return { throttleTime: 0, clientSideThrottleTime: throttle, topics };
  },
  parse: async (data) => {
    for (const t of data.topics)
      for (const p of t.partitions) if (p.errorCode !== 0) throw protocolError(p.errorCode);
    return data;
  },
};

/**
 * OffsetFetch v7 (`OffsetFetchRequest.json`): group_id [topics: name [partition_indexes]]
 * require_stable, compact, each struct ending with its tag buffer.
 */
export function offsetFetchV7Request({
  groupId,
  topics,
  requireStable = true,
}: OffsetFetchStableArgs & { requireStable?: boolean }): KafkajsRequest {
  const { Encoder, apiKeys } = codecs();
  const encodeTopic = (t: OffsetFetchStableArgs['topics'][number]) =>
    noTags(
      new Encoder()
        .writeUVarIntString(t.topic)
        .writeUVarIntArray(t.partitions.map((p) => new Encoder().writeInt32(p.partition))),
    );
  return {
    apiKey: apiKeys.OffsetFetch,
    apiVersion: OFFSET_FETCH_STABLE_VERSION,
    apiName: 'OffsetFetch',
    encode: async () =>
      noTags(
        noTags(new Encoder()) // request header v2's tag buffer
          .writeUVarIntString(groupId)
          .writeUVarIntArray(topics.map(encodeTopic))
          .writeBoolean(requireStable),
      ),
  };
}

interface OffsetFetchV7Decoded extends OffsetFetchStableResult {
  throttleTime: number;
  clientSideThrottleTime: number;
  errorCode: number;
}

/**
 * OffsetFetch v7's answer (`OffsetFetchResponse.json`): throttle_time_ms [topics: name
 * [partitions: partition_index committed_offset committed_leader_epoch metadata error_code]]
 * error_code. The group's error (e.g. NOT_COORDINATOR) is thrown; the partitions' are returned.
 */
export const offsetFetchV7Response: KafkajsResponse<OffsetFetchV7Decoded, OffsetFetchStableResult> = {
  decode: async (raw) => {
    const { Decoder } = codecs();
    const d = new Decoder(raw);
    d.readTaggedFields(); // response header v1
    const throttle = d.readInt32();
    const responses =
      d.readUVarIntArray((t: Any) => {
        const topic = t.readUVarIntString();
        const partitions =
          t.readUVarIntArray((p: Any) => {
            const partition = p.readInt32();
            const offset = p.readInt64().toString();
            p.readInt32(); // committed_leader_epoch: kafkajs's fetches do not use it
            const metadata = p.readUVarIntString();
            const errorCode = p.readInt16();
            p.readTaggedFields();
            return { partition, offset, metadata, errorCode };
          }) ?? [];
        t.readTaggedFields();
        return { topic, partitions };
      }) ?? [];
    const errorCode = d.readInt16();
    d.readTaggedFields();
    return { throttleTime: 0, clientSideThrottleTime: throttle, responses, errorCode };
  },
  parse: async (data) => {
    if (data.errorCode !== 0) throw protocolError(data.errorCode);
    return { responses: data.responses };
  },
};

const symbolOf = (o: object, description: string): symbol => {
  const s = Object.getOwnPropertySymbols(o).find((x) => x.description === description);
  if (s === undefined) throw new Error(`kafkajs internals changed: no ${description}`);
  return s;
};

/**
 * Throws kafkajs's non-retriable error unless the broker implements `version` of `apiKey`. The
 * broker's own range, not kafkajs's negotiated version: kafkajs would pick at most its highest
 * (v1 and v4 here).
 */
function requireVersion(broker: Any, apiKey: number, version: number, what: string): void {
  const range = broker.versions?.[apiKey];
  if (range != null && range.minVersion <= version && version <= range.maxVersion) return;
  const { KafkaJSNonRetriableError } = require('kafkajs/src/errors.js');
  const offers = range == null ? 'none' : `v${range.minVersion}–v${range.maxVersion}`;
  throw new KafkaJSNonRetriableError(
    `${what} needs v${version}; broker ${broker.brokerAddress} offers ${offers}${broker.versions == null ? ' (not connected)' : ''}`,
  );
}

/**
 * INVALID_PRODUCER_EPOCH (47, not retriable: kafkajs's retrier gives up), without a request: the
 * TxnOffsetCommit of a producer the worker threw away must not go with any generation's fields.
 */
function staleProducerError(why: string): Error {
  const { KafkaJSProtocolError } = require('kafkajs/src/errors.js');
  return new KafkaJSProtocolError({
    type: 'INVALID_PRODUCER_EPOCH',
    code: 47,
    retriable: false,
    message: `TxnOffsetCommit not sent: ${why}`,
  });
}

/** The member fields of a `txnOffsetCommit` call, or undefined when it has none (a kafkajs call). */
function groupMetadataOf(args: Any): GroupMetadata | undefined {
  const { generationId, memberId, groupInstanceId } = args ?? {};
  if (generationId === undefined && memberId === undefined && groupInstanceId === undefined) return undefined;
  // Half of it is a caller's bug; sending v1 would drop the fencing it asked for.
  if (!Number.isInteger(generationId) || typeof memberId !== 'string')
    throw new TypeError(
      `txnOffsetCommit with group metadata needs generationId (an integer) and memberId (a string); got ${JSON.stringify({ generationId, memberId })}`,
    );
  if (groupInstanceId != null && typeof groupInstanceId !== 'string')
    throw new TypeError('txnOffsetCommit: groupInstanceId must be a string or null');
  return { generationId, memberId, groupInstanceId: groupInstanceId ?? null };
}

const PATCHED = Symbol.for('sluice.kafkajsTxnV3');

function patchBroker(): void {
  const Broker = require('kafkajs/src/broker/index.js');
  const apiKeys = require('kafkajs/src/protocol/requests/apiKeys.js');
  const SEND = symbolOf(Broker.prototype, 'private:Broker:sendRequest');
  const p = Broker.prototype;
  if (p[PATCHED] === true) return;
  const original = p.txnOffsetCommit;
  if (typeof original !== 'function') throw new Error('kafkajs internals changed: no Broker#txnOffsetCommit');

  p.txnOffsetCommit = async function txnOffsetCommit(this: Any, args: Any) {
    // kafkajs's own sendOffsets passes no member fields: a worker's producer under exactly-once v2
    // pinned its transaction's (txn-group-metadata.ts), so that path sends v3 too. A late retry of
    // a producer the worker replaced, or of closed transactions, is refused as a fenced one's.
    let group = groupMetadataOf(args);
    if (group === undefined) {
      const pin = txnGroupMetadataFor(args?.transactionalId, args?.producerId, args?.producerEpoch);
      if (pin.kind === 'none') return original.call(this, args);
      if (pin.kind === 'stale') throw staleProducerError(pin.why);
      group = pin.meta;
    }
    requireVersion(
      this,
      apiKeys.TxnOffsetCommit,
      TXN_OFFSET_COMMIT_MEMBER_VERSION,
      `a transactional offset commit fenced by group ${args.groupId}'s generation (TxnOffsetCommit, Kafka ≥ 2.5)`,
    );
    return this[SEND]({
      request: txnOffsetCommitV3Request({ ...args, ...group }),
      response: txnOffsetCommitV3Response,
    });
  };

  p.offsetFetchStable = async function offsetFetchStable(
    this: Any,
    { groupId, topics }: OffsetFetchStableArgs,
  ): Promise<OffsetFetchStableResult> {
    requireVersion(
      this,
      apiKeys.OffsetFetch,
      OFFSET_FETCH_STABLE_VERSION,
      `reading group ${groupId}'s offsets with require_stable (OffsetFetch, Kafka ≥ 2.5)`,
    );
    return this[SEND]({
      request: offsetFetchV7Request({ groupId, topics }),
      response: offsetFetchV7Response,
    });
  };
  p[PATCHED] = true;
}

/** Why the patch did not install, or undefined when it did. */
export const txnV3Problem: string | undefined = (() => {
  try {
    patchBroker();
    return undefined;
  } catch (e) {
    return `patch failed: ${(e as Error).message}`;
  }
})();

/** True when kafkajs's Broker sends TxnOffsetCommit v3 and OffsetFetch v7 (see the module comment). */
export const txnV3Installed: boolean = txnV3Problem === undefined;
