/**
 * TxnOffsetCommit v3 and OffsetFetch v7 (kafkajs-txn-v3.ts, exactly-once v2's protocol layer)
 * against a real broker: the coordinator accepts a transactional offset commit that carries the
 * group's current generation and member id, refuses one of an older generation or of a member
 * that left, and holds a `require_stable` read (`KafkaAdmin.committedOffsetsStable`) until the
 * transaction with pending offsets ends. The group member is this test itself, through kafkajs's
 * Broker API (JoinGroup, SyncGroup), so that it knows its generation.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Producer } from 'kafkajs';
import { SluiceError } from '../../src/errors.js';
import { KafkaAdmin } from '../../src/kafka/admin.js';
import { producerCluster } from '../../src/kafka/kafkajs-patch.js';
import { createKafkajsCluster } from '../../src/kafka/partition-reader.js';
import { transactionalManagerOf } from '../../src/kafka/send-messages.js';
import { createTopics, deleteTopicsMatching, testKafka, uniqueName, withAdmin } from '../helpers/kafka.js';

const require = createRequire(import.meta.url);
const Broker = require('kafkajs/src/broker/index.js');

type Any = any;
type After = { after: (fn: () => Promise<unknown>) => void };

const GROUP_COORDINATOR = 0;
const TRANSACTION_COORDINATOR = 1;

/**
 * Topics, the admin, and `join` for the group member (through a kafkajs cluster of its own); the
 * members leave, and the group and topics are deleted, after the test.
 */
async function setUp(t: After, prefix: string) {
  const id = uniqueName(prefix);
  const input = `${id}-in`;
  const out = `${id}-out`;
  const group = `${id}-group`;
  await createTopics([
    { topic: input, partitions: 2 },
    { topic: out, partitions: 1 },
  ]);
  const cluster: Any = createKafkajsCluster(testKafka());
  await cluster.connect();
  const raw = testKafka().admin();
  await raw.connect();
  const admin = new KafkaAdmin(raw, testKafka());
  const members = new Set<string>();
  t.after(async () => {
    const coordinator = await cluster.findGroupCoordinator({ groupId: group });
    for (const memberId of members)
      await coordinator.leaveGroup({ groupId: group, memberId }).catch(() => undefined);
    await admin.close();
    await cluster.disconnect();
    await withAdmin((a) => a.deleteGroups([group]));
    await deleteTopicsMatching(id);
  });

  /**
   * Joins the group (or rejoins, with `memberId`) as a consumer-protocol member and syncs, as the
   * leader of a group of one; answers the generation it got.
   */
  const join = async (memberId = ''): Promise<Member> => {
    const coordinator = await cluster.findGroupCoordinator({ groupId: group });
    const joined = await coordinator.joinGroup({
      groupId: group,
      sessionTimeout: 30_000,
      rebalanceTimeout: 10_000,
      memberId,
      groupProtocols: [{ name: 'sluice-test', metadata: Buffer.alloc(0) }],
    });
    members.add(joined.memberId);
    assert.equal(joined.leaderId, joined.memberId, 'the only member leads');
    await coordinator.syncGroup({
      groupId: group,
      generationId: joined.generationId,
      memberId: joined.memberId,
      groupAssignment: [{ memberId: joined.memberId, memberAssignment: Buffer.alloc(0) }],
    });
    return { generationId: joined.generationId, memberId: joined.memberId };
  };
  return { id, input, out, group, cluster, admin, join };
}

interface Member {
  generationId: number;
  memberId: string;
}

/** A kafkajs transactional producer (its first transaction sends InitProducerId), closed after the test. */
async function transactional(t: After, transactionalId: string) {
  const p: Producer = testKafka().producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
  await p.connect();
  t.after(() => p.disconnect());
  const cluster: Any = producerCluster(p);
  assert.ok(cluster, 'the producer cluster is known (kafkajs-patch.ts)');

  /**
   * Begins a transaction with one record (so kafkajs's EndTxn is sent) and the group's offsets
   * added (AddOffsetsToTxn); `commitOffsets` then sends TxnOffsetCommit as given.
   */
  const begin = async (out: string, groupId: string) => {
    const tx = await p.transaction();
    await tx.send({ topic: out, messages: [{ value: 'x' }] });
    const eos = transactionalManagerOf(cluster);
    assert.ok(eos, "the producer's transactional manager is known (send-messages.ts)");
    const producer = { producerId: eos.getProducerId(), producerEpoch: eos.getProducerEpoch() };
    const txCoordinator = await cluster.findGroupCoordinator({
      groupId: transactionalId,
      coordinatorType: TRANSACTION_COORDINATOR,
    });
    await txCoordinator.addOffsetsToTxn({ transactionalId, groupId, ...producer });
    const commitOffsets = async (
      member: Partial<Member>,
      topic: string,
      offsets: Array<{ partition: number; offset: string }>,
    ) => {
      const coordinator = await cluster.findGroupCoordinator({ groupId, coordinatorType: GROUP_COORDINATOR });
      return coordinator.txnOffsetCommit({
        transactionalId,
        groupId,
        ...producer,
        ...member,
        topics: [{ topic, partitions: offsets.map((o) => ({ ...o, metadata: `m${o.offset}` })) }],
      });
    };
    return { tx, commitOffsets };
  };
  return { begin };
}

/** Offsets read without require_stable (kafkajs's admin: OffsetFetch v4), by partition. */
async function plainOffsets(groupId: string, topic: string): Promise<Record<number, string>> {
  const r = await withAdmin((a) => a.fetchOffsets({ groupId, topics: [topic] }));
  return Object.fromEntries(r[0]!.partitions.map((p) => [p.partition, p.offset]));
}

test('TxnOffsetCommit v3 with the current generation commits; an old generation or a departed member is refused', {
  timeout: 60_000,
}, async (t) => {
  const { id, input, out, group, cluster, admin, join } = await setUp(t, 'txn-v3');
  const { begin } = await transactional(t, `${id}-tx`);
  const first = await join();

  // (a) The current generation and member id: accepted, and committed with the transaction.
  const a = await begin(out, group);
  await a.commitOffsets(first, input, [
    { partition: 0, offset: '5' },
    { partition: 1, offset: '3' },
  ]);
  await a.tx.commit();
  assert.deepEqual(
    await admin.committedOffsetsStable(group, [{ topic: input, partitions: [0, 1] }], { timeoutMs: 5000 }),
    [
      { topic: input, partition: 0, offset: '5', metadata: 'm5' },
      { topic: input, partition: 1, offset: '3', metadata: 'm3' },
    ],
  );
  assert.deepEqual(await plainOffsets(group, input), { 0: '5', 1: '3' });

  // (b) The member rejoins: the group moves to a new generation, and the old one is refused.
  const second = await join(first.memberId);
  assert.equal(second.memberId, first.memberId);
  assert.ok(second.generationId > first.generationId, `a new generation: ${JSON.stringify(second)}`);
  const b = await begin(out, group);
  await assert.rejects(b.commitOffsets(first, input, [{ partition: 0, offset: '6' }]), (e: Any) => {
    assert.equal(e.type, 'ILLEGAL_GENERATION', e.message);
    assert.equal(e.code, 22);
    return true;
  });
  // The transaction can still be aborted; the refused offset was never pending.
  await b.tx.abort();

  // The member's current generation is accepted in the next transaction.
  const b2 = await begin(out, group);
  await b2.commitOffsets(second, input, [{ partition: 0, offset: '7' }]);
  await b2.tx.commit();
  // Read stable: the coordinator applies a commit's offsets when its marker is written, just after EndTxn.
  const committed = () =>
    admin.committedOffsetsStable(group, [{ topic: input, partitions: [0, 1] }], { timeoutMs: 5000 });
  assert.deepEqual(
    (await committed()).map((o) => o.offset),
    ['7', '3'],
  );

  // A member that left: its member id is unknown to the coordinator.
  const coordinator = await cluster.findGroupCoordinator({ groupId: group });
  await coordinator.leaveGroup({ groupId: group, memberId: second.memberId });
  const c = await begin(out, group);
  await assert.rejects(c.commitOffsets(second, input, [{ partition: 0, offset: '8' }]), (e: Any) => {
    assert.equal(e.type, 'UNKNOWN_MEMBER_ID', e.message);
    assert.equal(e.code, 25);
    return true;
  });
  await c.tx.abort();
  assert.deepEqual(
    (await committed()).map((o) => o.offset),
    ['7', '3'],
    'nothing refused was committed',
  );
});

test('committedOffsetsStable waits while a transaction holds pending offsets, and gives up naming the partition', {
  timeout: 60_000,
}, async (t) => {
  const { id, input, out, group, cluster, admin, join } = await setUp(t, 'txn-v7');
  const { begin } = await transactional(t, `${id}-tx`);
  const member = await join();
  const both = [{ topic: input, partitions: [0, 1] }];

  const first = await begin(out, group);
  await first.commitOffsets(member, input, [{ partition: 0, offset: '5' }]);
  await first.tx.commit();

  // Offsets pending for partition 0 only: TxnOffsetCommit sent, EndTxn not yet.
  const open = await begin(out, group);
  await open.commitOffsets(member, input, [{ partition: 0, offset: '9' }]);
  assert.deepEqual(
    await plainOffsets(group, input),
    { 0: '5', 1: '-1' },
    'without require_stable: the old offset',
  );
  const coordinator = await cluster.findGroupCoordinator({ groupId: group });
  const direct = await coordinator.offsetFetchStable({
    groupId: group,
    topics: [{ topic: input, partitions: [{ partition: 0 }, { partition: 1 }] }],
  });
  assert.deepEqual(
    direct.responses[0].partitions.map((p: Any) => [p.partition, p.errorCode]),
    [
      [0, 88],
      [1, 0],
    ],
    'UNSTABLE_OFFSET_COMMIT for the partition with pending offsets only',
  );

  // Every answer committedOffsetsStable gets, recorded (the error code of each partition).
  const answers: number[][] = [];
  const original = Broker.prototype.offsetFetchStable;
  Broker.prototype.offsetFetchStable = async function recorded(this: Any, args: Any) {
    const r = await original.call(this, args);
    answers.push(r.responses.flatMap((x: Any) => x.partitions.map((p: Any) => p.errorCode)));
    return r;
  };
  t.after(() => {
    Broker.prototype.offsetFetchStable = original;
  });

  const started = Date.now();
  const read = admin.committedOffsetsStable(group, both, { timeoutMs: 10_000 });
  await sleep(500);
  await open.tx.commit();
  const offsets = await read;
  const took = Date.now() - started;
  assert.deepEqual(offsets, [
    { topic: input, partition: 0, offset: '9', metadata: 'm9' },
    { topic: input, partition: 1, offset: '-1', metadata: null },
  ]);
  assert.ok(took >= 500, `it waited for the transaction (${took} ms)`);
  assert.ok(took < 3000, `and returned soon after its commit (${took} ms)`);
  assert.ok(answers.length >= 3, `asked again while unstable: ${JSON.stringify(answers)}`);
  assert.deepEqual(answers[0], [88, 0]);
  assert.deepEqual(answers.at(-1), [0, 0]);

  // A transaction left open: a short timeout gives up, naming the unstable partition.
  const left = await begin(out, group);
  await left.commitOffsets(member, input, [{ partition: 1, offset: '4' }]);
  const before = Date.now();
  await assert.rejects(admin.committedOffsetsStable(group, both, { timeoutMs: 300 }), (e: unknown) => {
    assert.ok(e instanceof SluiceError, String(e));
    assert.equal(e.code, 'SLUICE_KAFKA');
    assert.match(e.message, new RegExp(`${input}:1 stayed unstable`));
    assert.doesNotMatch(e.message, new RegExp(`${input}:0`));
    return true;
  });
  const gaveUpAfter = Date.now() - before;
  assert.ok(gaveUpAfter >= 300 && gaveUpAfter < 2000, `gave up at the timeout (${gaveUpAfter} ms)`);
  await left.tx.abort();
  assert.deepEqual(
    await admin.committedOffsetsStable(group, both, { timeoutMs: 5000 }),
    [
      { topic: input, partition: 0, offset: '9', metadata: 'm9' },
      { topic: input, partition: 1, offset: '-1', metadata: null },
    ],
    'the aborted offset is gone, and nothing is unstable any more',
  );
});
