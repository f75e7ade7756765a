import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import '../../../src/kafka/client.js';
import { kafkajsPatchStatus } from '../../../src/kafka/kafkajs-preload.js';
import {
  offsetFetchV7Request,
  offsetFetchV7Response,
  protocolError,
  txnOffsetCommitV3Request,
  txnOffsetCommitV3Response,
  txnV3Installed,
} from '../../../src/kafka/kafkajs-txn-v3.js';
import { isFencedError } from '../../../src/kafka/producer.js';
import {
  pinnedTxnGroupMetadata,
  pinTxnGroupMetadata,
  retireTxnGroupMetadata,
} from '../../../src/kafka/txn-group-metadata.js';
import { fakeBroker as fakeBrokerOf } from '../../helpers/fake-broker.js';

const require = createRequire(import.meta.url);
const Broker = require('kafkajs/src/broker/index.js');
const createRequest = require('kafkajs/src/protocol/request.js');

// Kafka's primitive types, written out independently of kafkajs's Encoder
// (https://kafka.apache.org/protocol#protocol_types).
const int8 = (v: number) => Buffer.from([v & 0xff]);
const int16 = (v: number) => {
  const b = Buffer.alloc(2);
  b.writeInt16BE(v);
  return b;
};
const int32 = (v: number) => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(v);
  return b;
};
const int64 = (v: bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(v);
  return b;
};
/** Unsigned varint: 7 bits a byte, low bits first, high bit set on all but the last byte. */
const uvarint = (v: number) => {
  const out: number[] = [];
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
  return Buffer.from(out);
};
/** COMPACT_(NULLABLE_)STRING: length + 1 as an unsigned varint (0: null), then the UTF-8 bytes. */
const compactString = (s: string | null) =>
  s === null ? uvarint(0) : Buffer.concat([uvarint(Buffer.byteLength(s) + 1), Buffer.from(s)]);
/** COMPACT_ARRAY: length + 1, then the elements. */
const compactArray = (items: Buffer[]) => Buffer.concat([uvarint(items.length + 1), ...items]);
/** An empty tagged-field section. */
const TAGS = Buffer.from([0]);
const cat = (...parts: Buffer[]) => Buffer.concat(parts);

test('the primitives above should match the protocol guide', () => {
  assert.deepEqual([...uvarint(300)], [0xac, 0x02]);
  assert.deepEqual([...compactString('ab')], [3, 0x61, 0x62]);
  assert.deepEqual([...compactString('')], [1]);
  assert.deepEqual([...compactString(null)], [0]);
  assert.deepEqual([...int64(-1n)], [255, 255, 255, 255, 255, 255, 255, 255]);
});

test('the patch should be installed and listed with the other kafkajs patches', () => {
  assert.equal(txnV3Installed, true);
  const { patches, problems } = kafkajsPatchStatus();
  assert.equal(patches['TxnOffsetCommit v3 and OffsetFetch v7, exactly-once v2 (kafkajs-txn-v3.ts)'], true);
  assert.deepEqual(problems, []);
  assert.equal(typeof Broker.prototype.offsetFetchStable, 'function');
});

const COMMIT = {
  transactionalId: 'app-pod-1',
  groupId: 'app',
  producerId: '4611686018427387905', // above 2^53: written exactly
  producerEpoch: 7,
  generationId: 12,
  memberId: 'm-1',
  groupInstanceId: 'pod-1',
  topics: [
    {
      topic: 'in',
      partitions: [
        { partition: 0, offset: '100', metadata: 'w:5' },
        { partition: 3, offset: '9007199254740993', metadata: null },
      ],
    },
    { topic: 'é', partitions: [] },
  ],
};

/** TxnOffsetCommit v3 of {@link COMMIT} as TxnOffsetCommitRequest.json lays it out, field by field. */
const commitBody = (groupInstanceId: string | null = 'pod-1') =>
  cat(
    compactString('app-pod-1'), // transactional_id
    compactString('app'), // group_id
    int64(4611686018427387905n), // producer_id
    int16(7), // producer_epoch
    int32(12), // generation_id
    compactString('m-1'), // member_id
    compactString(groupInstanceId), // group_instance_id
    compactArray([
      cat(
        compactString('in'), // name
        compactArray([
          // partition_index committed_offset committed_leader_epoch committed_metadata
          cat(int32(0), int64(100n), int32(-1), compactString('w:5'), TAGS),
          cat(int32(3), int64(9007199254740993n), int32(-1), compactString(null), TAGS),
        ]),
        TAGS,
      ),
      cat(compactString('é'), compactArray([]), TAGS),
    ]),
    TAGS,
  );

test('TxnOffsetCommit v3 should encode as Kafka lays it out, after a request header v2', async () => {
  const request = txnOffsetCommitV3Request(COMMIT);
  assert.equal(request.apiKey, 28);
  assert.equal(request.apiVersion, 3);
  const framed = (await createRequest({ correlationId: 5, clientId: 'c', request })).buffer as Buffer;
  const header = cat(int16(28), int16(3), int32(5), int16(1), Buffer.from('c'), TAGS);
  const expected = cat(header, commitBody());
  assert.deepEqual(framed, cat(int32(expected.length), expected));
  // A dynamic member: a null instance id.
  const dynamic = (await txnOffsetCommitV3Request({ ...COMMIT, groupInstanceId: null }).encode()).buffer;
  assert.deepEqual(dynamic, cat(TAGS, commitBody(null)));
});

test('OffsetFetch v7 should encode as Kafka lays it out, with require_stable', async () => {
  const request = offsetFetchV7Request({
    groupId: 'app',
    topics: [
      { topic: 'in', partitions: [{ partition: 0 }, { partition: 2 }] },
      { topic: 'x', partitions: [] },
    ],
  });
  assert.equal(request.apiKey, 9);
  assert.equal(request.apiVersion, 7);
  const body = cat(
    TAGS, // request header v2's tagged fields
    compactString('app'), // group_id
    compactArray([
      cat(compactString('in'), compactArray([int32(0), int32(2)]), TAGS), // name partition_indexes
      cat(compactString('x'), compactArray([]), TAGS),
    ]),
    int8(1), // require_stable
    TAGS,
  );
  assert.deepEqual((await request.encode()).buffer, body);
  const unstable = offsetFetchV7Request({ groupId: 'g', topics: [], requireStable: false });
  assert.deepEqual(
    (await unstable.encode()).buffer,
    cat(TAGS, compactString('g'), compactArray([]), int8(0), TAGS),
  );
});

/** A TxnOffsetCommit v3 answer, after the correlation id: response header v1's tags, then the body. */
const commitAnswer = (codes: number[], throttle = 0) =>
  cat(
    TAGS,
    int32(throttle),
    compactArray([
      cat(
        compactString('in'),
        compactArray(codes.map((code, i) => cat(int32(i), int16(code), TAGS))),
        // One tagged field the decoder does not know: skipped (tag 0, 2 bytes).
        cat(uvarint(1), uvarint(0), uvarint(2), Buffer.from([0xbe, 0xef])),
      ),
    ]),
    TAGS,
  );

const decodeAndParse = async <D, P>(
  r: { decode: (b: Buffer) => Promise<D>; parse: (d: D) => Promise<P> },
  b: Buffer,
) => r.parse(await r.decode(b));

test('a TxnOffsetCommit v3 answer should decode, and its first partition error be thrown as kafkajs names it', async () => {
  const ok = await decodeAndParse(txnOffsetCommitV3Response, commitAnswer([0, 0], 30));
  assert.deepEqual(ok, {
    throttleTime: 0,
    clientSideThrottleTime: 30,
    topics: [
      {
        topic: 'in',
        partitions: [
          { partition: 0, errorCode: 0 },
          { partition: 1, errorCode: 0 },
        ],
      },
    ],
  });
  const cases: Array<[number, string, boolean]> = [
    [22, 'ILLEGAL_GENERATION', false],
    [25, 'UNKNOWN_MEMBER_ID', false],
    [82, 'FENCED_INSTANCE_ID', false],
    [90, 'PRODUCER_FENCED', false],
    [16, 'NOT_COORDINATOR_FOR_GROUP', true],
  ];
  for (const [code, type, retriable] of cases)
    await assert.rejects(decodeAndParse(txnOffsetCommitV3Response, commitAnswer([0, code])), (e: any) => {
      assert.equal(e.name, 'KafkaJSProtocolError');
      assert.equal(e.type, type);
      assert.equal(e.code, code);
      assert.equal(e.retriable, retriable);
      return true;
    });
});

test('PRODUCER_FENCED (90), unknown to kafkajs, should keep its code and count as a fence', () => {
  const { createErrorFromCode } = require('kafkajs/src/protocol/error.js');
  assert.equal(createErrorFromCode(90).code, -99, 'kafkajs alone loses the code');
  const e = protocolError(90);
  assert.equal(e.code, 90);
  assert.equal(e.type, 'PRODUCER_FENCED');
  assert.equal(isFencedError(e), true);
  const other = protocolError(4242);
  assert.equal(other.code, 4242, 'any code kafkajs does not know keeps its number');
  assert.equal(other.type, 'KAFKAJS_UNKNOWN_ERROR_CODE');
  assert.equal(isFencedError(protocolError(22)), false);
});

/** An OffsetFetch v7 answer: response header v1's tags, then the body. */
const fetchAnswer = (topLevelError = 0) =>
  cat(
    TAGS,
    int32(0), // throttle_time_ms
    compactArray([
      cat(
        compactString('in'),
        compactArray([
          // partition_index committed_offset committed_leader_epoch metadata error_code
          cat(int32(0), int64(42n), int32(3), compactString('w:9'), int16(0), TAGS),
          cat(int32(1), int64(-1n), int32(-1), compactString(''), int16(88), TAGS),
          cat(int32(2), int64(-1n), int32(-1), compactString(null), int16(0), TAGS),
        ]),
        TAGS,
      ),
    ]),
    int16(topLevelError),
    TAGS,
  );

test('an OffsetFetch v7 answer should decode with per-partition errors returned, and a group error thrown', async () => {
  assert.deepEqual(await decodeAndParse(offsetFetchV7Response, fetchAnswer()), {
    responses: [
      {
        topic: 'in',
        partitions: [
          { partition: 0, offset: '42', metadata: 'w:9', errorCode: 0 },
          { partition: 1, offset: '-1', metadata: '', errorCode: 88 },
          { partition: 2, offset: '-1', metadata: null, errorCode: 0 },
        ],
      },
    ],
  });
  await assert.rejects(decodeAndParse(offsetFetchV7Response, fetchAnswer(14)), {
    type: 'GROUP_LOAD_IN_PROGRESS',
    code: 14,
  });
});

/**
 * A kafkajs Broker without a connection (test/helpers/fake-broker.ts) that answers the requests of
 * this module's versions (the flexible ones) with `answer`, decoded and parsed.
 */
const fakeBroker = (maxVersions: Record<string, number>, answer?: Buffer) =>
  fakeBrokerOf(maxVersions, async (request, response) => {
    const ours = request.apiVersion === (request.apiName === 'OffsetFetch' ? 7 : 3);
    return ours && answer !== undefined ? response.parse(await response.decode(answer)) : {};
  });

/** Kafka 4.x's ranges: TxnOffsetCommit 0–5, OffsetFetch 1–9 (v0 removed by KIP-896). */
const KAFKA_4 = { TxnOffsetCommit: 5, OffsetFetch: 9 };

test('Broker#txnOffsetCommit should send v3 with the member fields, kafkajs v1 without them', async () => {
  const { b, sent } = fakeBroker(KAFKA_4, commitAnswer([0]));
  await b.txnOffsetCommit(COMMIT);
  const { generationId, memberId, groupInstanceId, ...v1Args } = COMMIT;
  await b.txnOffsetCommit(v1Args);
  assert.deepEqual(
    sent.map((r) => `${r.apiName} v${r.apiVersion}`),
    ['TxnOffsetCommit v3', 'TxnOffsetCommit v1'],
  );
  assert.deepEqual(sent[0]!.bytes, cat(TAGS, commitBody()));
  // Without an instance id: a dynamic member (null).
  await b.txnOffsetCommit({ ...v1Args, generationId: 12, memberId: 'm-1' });
  assert.deepEqual(sent[2]!.bytes, cat(TAGS, commitBody(null)));
  const fenced = fakeBroker(KAFKA_4, commitAnswer([22]));
  await assert.rejects(fenced.b.txnOffsetCommit(COMMIT), { type: 'ILLEGAL_GENERATION', code: 22 });
});

test('Broker#txnOffsetCommit with member fields should refuse a broker without v3, and half of them', async () => {
  const { b, sent } = fakeBroker({ TxnOffsetCommit: 2 });
  await assert.rejects(b.txnOffsetCommit(COMMIT), (e: any) => {
    assert.equal(e.name, 'KafkaJSNonRetriableError');
    assert.match(e.message, /needs v3; broker fake:9092 offers v0–v2/);
    return true;
  });
  const k4 = fakeBroker(KAFKA_4);
  const { generationId, memberId, groupInstanceId, ...v1Args } = COMMIT;
  await assert.rejects(k4.b.txnOffsetCommit({ ...v1Args, generationId: 3 }), TypeError);
  await assert.rejects(k4.b.txnOffsetCommit({ ...v1Args, memberId: 'm' }), TypeError);
  await assert.rejects(k4.b.txnOffsetCommit({ ...v1Args, groupInstanceId: 'pod-1' }), TypeError);
  assert.equal(sent.length + k4.sent.length, 0, 'nothing sent');
});

test("Broker#txnOffsetCommit without member fields should send the pinned producer's v3 and refuse any other producer of the id", async () => {
  const { b, sent } = fakeBroker(KAFKA_4, commitAnswer([0]));
  const { generationId, memberId, groupInstanceId, ...kafkajsArgs } = COMMIT;
  const id = 'app-pod-pinned';
  const args = { ...kafkajsArgs, transactionalId: id };
  pinTxnGroupMetadata(
    id,
    { generationId, memberId, groupInstanceId },
    { producerId: COMMIT.producerId, epoch: 7 },
  );
  // kafkajs's own sendOffsets (no member fields) of the pinned producer: v3 with the pinned fields.
  await b.txnOffsetCommit(args);
  assert.deepEqual(
    sent.map((r) => `${r.apiName} v${r.apiVersion}`),
    ['TxnOffsetCommit v3'],
  );
  assert.deepEqual(pinnedTxnGroupMetadata(id), { generationId, memberId, groupInstanceId });
  // A later transaction, on the producer that replaced it, with a later generation: a late retry
  // of the replaced one (kafkajs's retrier goes on alone) must not take that generation's fields.
  pinTxnGroupMetadata(
    id,
    { generationId: 13, memberId, groupInstanceId },
    { producerId: COMMIT.producerId, epoch: 8 },
  );
  const stale = (e: any) => {
    assert.equal(e.type, 'INVALID_PRODUCER_EPOCH');
    assert.equal(e.retriable, false);
    assert.ok(isFencedError(e), 'a fence to the checkpoint that meets it');
    return true;
  };
  await assert.rejects(b.txnOffsetCommit(args), stale);
  await b.txnOffsetCommit({ ...args, producerEpoch: 8 });
  // Closed transactions: nothing of the id goes as kafkajs's unfenced v1 either.
  retireTxnGroupMetadata(id);
  await assert.rejects(b.txnOffsetCommit({ ...args, producerEpoch: 8 }), stale);
  assert.deepEqual(
    sent.map((r) => `${r.apiName} v${r.apiVersion}`),
    ['TxnOffsetCommit v3', 'TxnOffsetCommit v3'],
  );
  // An id never pinned is kafkajs's (v1), as before.
  await b.txnOffsetCommit({ ...args, transactionalId: 'app-v1-task' });
  assert.equal(sent.at(-1)!.apiVersion, 1);
});

test('Broker#offsetFetchStable should send v7 and return the partitions with their errors', async () => {
  const { b, sent } = fakeBroker(KAFKA_4, fetchAnswer());
  const topics = [{ topic: 'in', partitions: [{ partition: 0 }, { partition: 1 }, { partition: 2 }] }];
  const r = await b.offsetFetchStable({ groupId: 'app', topics });
  assert.deepEqual(
    r.responses[0].partitions.map((p: any) => p.errorCode),
    [0, 88, 0],
  );
  assert.deepEqual(
    sent.map((x) => `${x.apiName} v${x.apiVersion}`),
    ['OffsetFetch v7'],
  );
  assert.equal(sent[0]!.bytes.at(-2), 1, 'require_stable');
  const old = fakeBroker({ OffsetFetch: 6 });
  await assert.rejects(old.b.offsetFetchStable({ groupId: 'app', topics }), {
    name: 'KafkaJSNonRetriableError',
    message: /needs v7; broker fake:9092 offers v0–v6/,
  });
  assert.equal(old.sent.length, 0);
});
