import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { SluiceError } from '../../../src/errors.js';
import '../../../src/kafka/client.js';
import { isBrokerUnreachable } from '../../../src/kafka/error-chain.js';
import {
  assertKafkajsPatched,
  KAFKAJS_VERSION,
  kafkajsPatchStatus,
} from '../../../src/kafka/kafkajs-preload.js';
import { isFencedInstance, staticMembershipInstalled } from '../../../src/kafka/kafkajs-static.js';
import { fakeBroker as fakeBrokerOf } from '../../helpers/fake-broker.js';

const require = createRequire(import.meta.url);
/** A kafkajs Broker without a connection: it records the requests it would send. */
const fakeBroker = (maxVersions: Record<string, number>) =>
  fakeBrokerOf(maxVersions, () => ({ members: [] }));

/** Kafka 4.x's maximum versions of the group APIs (above what kafkajs implements). */
const KAFKA_4 = { JoinGroup: 9, SyncGroup: 5, Heartbeat: 4, LeaveGroup: 5 };

test('every kafkajs patch should be installed, on kafkajs 2.2.4', () => {
  assert.equal(staticMembershipInstalled, true);
  const status = kafkajsPatchStatus();
  assert.equal(status.version, KAFKAJS_VERSION);
  assert.ok(Object.values(status.patches).every(Boolean), JSON.stringify(status));
  assertKafkajsPatched();
});

test('a patch not installed, or another kafkajs version, should fail with SLUICE_KAFKAJS_UNPATCHED', () => {
  const ok = kafkajsPatchStatus();
  const fails = (s: typeof ok, re: RegExp) =>
    assert.throws(
      () => assertKafkajsPatched(s),
      (e: unknown) => e instanceof SluiceError && e.code === 'SLUICE_KAFKAJS_UNPATCHED' && re.test(e.message),
    );
  fails(
    { ...ok, patches: { ...ok.patches, 'static membership (kafkajs-static.ts)': false } },
    /static membership \(kafkajs-static\.ts\) is not installed/,
  );
  fails({ ...ok, version: '2.2.5' }, /kafkajs 2\.2\.5 is installed, Sluice needs exactly 2\.2\.4/);
  fails(
    { version: '2.3.0', patches: { a: false, b: true }, problems: ['a: loaded too early'] },
    /2\.3\.0 .*; a is not installed \(a: loaded too early\)/,
  );
});

test('the group requests should carry group.instance.id, in the versions that have it', async () => {
  const { b, sent } = fakeBroker(KAFKA_4);
  const id = 'pod-7';
  await b.joinGroup({
    groupId: 'g',
    sessionTimeout: 30000,
    rebalanceTimeout: 60000,
    groupInstanceId: id,
    groupProtocols: [{ name: 'x', metadata: Buffer.alloc(0) }],
  });
  await b.syncGroup({
    groupId: 'g',
    generationId: 1,
    memberId: 'm',
    groupInstanceId: id,
    groupAssignment: [],
  });
  await b.heartbeat({ groupId: 'g', groupGenerationId: 1, memberId: 'm', groupInstanceId: id });
  await b.leaveGroup({ groupId: 'g', memberId: 'm', groupInstanceId: id });
  await b.leaveGroup({ groupId: 'g', members: [{ memberId: '', groupInstanceId: id }] });
  assert.deepEqual(
    sent.map((r) => `${r.apiName} v${r.apiVersion}`),
    ['JoinGroup v5', 'SyncGroup v3', 'Heartbeat v3', 'LeaveGroup v3', 'LeaveGroup v3'],
  );
  const idBytes = Buffer.concat([Buffer.from([0, id.length]), Buffer.from(id)]);
  for (const r of sent) assert.ok(r.bytes.includes(idBytes), `${r.apiName} carries the instance id`);
  // A dynamic member sends a null instance id (length -1).
  const dyn = fakeBroker(KAFKA_4);
  await dyn.b.heartbeat({ groupId: 'g', groupGenerationId: 1, memberId: 'm' });
  assert.ok(dyn.sent[0]!.bytes.subarray(-2).equals(Buffer.from([0xff, 0xff])));
});

test('a static member on a broker without JoinGroup v5 should fail rather than join as a dynamic one', async () => {
  const { b, sent } = fakeBroker({ ...KAFKA_4, JoinGroup: 4, LeaveGroup: 2 });
  await assert.rejects(
    b.joinGroup({
      groupId: 'g',
      sessionTimeout: 1,
      rebalanceTimeout: 1,
      groupInstanceId: 'i',
      groupProtocols: [],
    }),
    /needs JoinGroup v5/,
  );
  await assert.rejects(
    b.leaveGroup({ groupId: 'g', members: [{ memberId: '', groupInstanceId: 'i' }] }),
    /needs LeaveGroup v3/,
  );
  assert.equal(sent.length, 0);
});

test('FENCED_INSTANCE_ID should be recognized however kafkajs wrapped it', () => {
  const fenced = Object.assign(new Error('fenced'), { type: 'FENCED_INSTANCE_ID' });
  assert.equal(isFencedInstance(fenced), true);
  assert.equal(
    isFencedInstance(new Error('retries exceeded', { cause: new Error('x', { cause: fenced }) })),
    true,
  );
  assert.equal(isFencedInstance(Object.assign(new Error('x'), { originalError: fenced })), true);
  assert.equal(isFencedInstance(Object.assign(new Error('x'), { type: 'UNKNOWN_MEMBER_ID' })), false);
  assert.equal(isFencedInstance(undefined), false);
});

/**
 * A ConsumerGroup as kafkajs's consumer makes it in run(), for a consumer made with
 * `kafka.consumer({ groupInstanceId, leaveGroupOnStop })`, talking to a recording coordinator.
 */
function staticGroup(
  groupInstanceId: string | undefined,
  leave: () => boolean,
  beforeJoin?: () => Promise<void>,
  joinFailed?: (e: unknown) => void,
) {
  const { Kafka, logLevel } = require('kafkajs');
  const kafka = new Kafka({ brokers: ['127.0.0.1:1'], logLevel: logLevel.NOTHING });
  const CREATE = Object.getOwnPropertySymbols(kafka).find(
    (s) => s.description === 'private:Kafka:createCluster',
  )!;
  let cluster: any;
  const create = kafka[CREATE];
  kafka[CREATE] = (o: unknown) => (cluster = create.call(kafka, o));
  const calls: Array<[string, any]> = [];
  kafka.consumer({ groupId: 'g', groupInstanceId, leaveGroupOnStop: leave, beforeJoin, joinFailed });
  const { MemberAssignment } = require('kafkajs/src/consumer/assignerProtocol.js');
  // A Broker's methods live on its prototype, as here.
  const coordinator = Object.create({
    joinGroup: async (a: any) => {
      calls.push(['joinGroup', a]);
      return { generationId: 1, leaderId: 'other', memberId: 'm-1', members: [], groupProtocol: 'p' };
    },
    syncGroup: async (a: any) => {
      calls.push(['syncGroup', a]);
      return { memberAssignment: MemberAssignment.encode({ version: 0, assignment: {} }) };
    },
    heartbeat: async (a: any) => calls.push(['heartbeat', a]),
    leaveGroup: async (a: any) => calls.push(['leaveGroup', a]),
  });
  cluster.findGroupCoordinator = async () => coordinator;
  const ConsumerGroup = require('kafkajs/src/consumer/consumerGroup.js');
  const logger = { namespace: () => logger, debug() {}, info() {}, warn() {}, error() {} };
  const g = new ConsumerGroup({
    cluster,
    groupId: 'g',
    topics: [],
    topicConfigurations: {},
    logger,
    instrumentationEmitter: { emit() {} },
    assigners: [],
    sessionTimeout: 30000,
    rebalanceTimeout: 60000,
    retry: { retries: 0 },
  });
  g.generatePartitionsPerSubscribedTopic = () => new Map();
  const sym = (d: string) =>
    Object.getOwnPropertySymbols(ConsumerGroup.prototype).find((s) => s.description === d)!;
  return {
    g,
    calls,
    coordinator,
    JOIN: sym('private:ConsumerGroup:join'),
    SYNC: sym('private:ConsumerGroup:sync'),
  };
}

test("kafkajs's consumer group should join, sync and heartbeat with the consumer's groupInstanceId", async () => {
  const { g, calls, coordinator, JOIN, SYNC } = staticGroup('pod-2', () => false);
  await g[JOIN]();
  await g[SYNC]();
  await g.heartbeat({ interval: 0 });
  assert.deepEqual(
    calls.map(([name, a]) => [name, a.groupInstanceId, a.memberId]),
    [
      ['joinGroup', 'pod-2', ''],
      ['syncGroup', 'pod-2', 'm-1'],
      ['heartbeat', 'pod-2', 'm-1'],
    ],
  );
  assert.equal(Object.hasOwn(coordinator, 'syncGroup'), false, 'the coordinator is left as it was');
});

test('a static member should leave the group on stop only when asked to; a dynamic one always', async () => {
  let leave = false;
  const s = staticGroup('pod-2', () => leave);
  await s.g[s.JOIN]();
  await s.g.leave();
  assert.deepEqual(
    s.calls.map(([n]) => n),
    ['joinGroup'],
    'no LeaveGroup: a restart gets the tasks back',
  );
  assert.equal(s.g.memberId, null);
  leave = true;
  await s.g[s.JOIN]();
  await s.g.leave();
  assert.deepEqual(s.calls.at(-1), [
    'leaveGroup',
    { groupId: 'g', memberId: 'm-1', groupInstanceId: 'pod-2' },
  ]);

  const d = staticGroup(undefined, () => false);
  await d.g[d.JOIN]();
  await d.g.leave();
  assert.deepEqual(d.calls.at(-1), ['leaveGroup', { groupId: 'g', memberId: 'm-1', groupInstanceId: null }]);
  assert.equal(d.calls[0]![1].groupInstanceId, null);
});

test('the beforeJoin hook should run, and be awaited, before every JoinGroup (the eager revoke point)', async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  const order: string[] = [];
  const s = staticGroup(
    'pod-3',
    () => false,
    async () => {
      order.push('hook');
      await gate;
      order.push('hook done');
    },
  );
  const joining = s.g[s.JOIN]();
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(s.calls.length, 0, 'no JoinGroup while the hook runs');
  release();
  await joining;
  await s.g[s.JOIN]();
  assert.deepEqual(
    [...order, ...s.calls.map(([n]) => n)],
    ['hook', 'hook done', 'hook', 'hook done', 'joinGroup', 'joinGroup'],
  );
});

test('a rejoin kafkajs gives up on should call joinFailed once; one it retries, not in between', async () => {
  const errors = require('kafkajs/src/errors.js');
  const failures: unknown[] = [];
  const s = staticGroup(
    'pod-5',
    () => false,
    async () => undefined,
    (e) => failures.push(e),
  );
  await s.g.joinAndSync();
  assert.equal(s.g.generationId, 1);
  assert.equal(failures.length, 0, 'a join that worked is no failure');
  // The coordinator of a group that just moved (a broker restarted) is still loading it.
  const loading = new errors.KafkaJSProtocolError({
    type: 'COORDINATOR_LOAD_IN_PROGRESS',
    code: 14,
    retriable: true,
    message: "The coordinator is loading and hence can't process requests for this group",
  });
  const refuse = () => {
    throw loading;
  };
  s.coordinator.joinGroup = async () => refuse();
  await assert.rejects(s.g.joinAndSync(), (e) => e === loading);
  assert.deepEqual(failures, [loading], 'kafkajs gave up: the member keeps its assignment');
  assert.equal(s.g.generationId, 1, 'the generation is unchanged');
  // A rebalance error is retried inside joinAndSync (JoinGroup again): not a failure of it.
  const rebalancing = new errors.KafkaJSProtocolError({
    type: 'REBALANCE_IN_PROGRESS',
    code: 27,
    retriable: false,
    message: 'The group is rebalancing, so a rejoin is needed',
  });
  let joins = 0;
  s.coordinator.joinGroup = async () => {
    joins++;
    if (joins === 1) throw rebalancing;
    return { generationId: 2, leaderId: 'other', memberId: 'm-1', members: [], groupProtocol: 'p' };
  };
  s.g.retrier = require('kafkajs/src/retry/index.js')({ retries: 2, initialRetryTime: 1 });
  await s.g.joinAndSync();
  assert.equal(joins, 2);
  assert.equal(failures.length, 1, 'no joinFailed for a retry inside the rejoin');
  assert.equal(s.g.generationId, 2);
  // A JoinGroup that gets through (generation 3), then a SyncGroup kafkajs gives up on: the
  // member never received generation 3's assignment, and goes back to generation 2, so that its
  // next heartbeat meets ILLEGAL_GENERATION and kafkajs rejoins.
  s.coordinator.joinGroup = async () => ({
    generationId: 3,
    leaderId: 'other',
    memberId: 'm-2',
    members: [],
    groupProtocol: 'p',
  });
  const gone = new errors.KafkaJSConnectionError('Connection error: the coordinator went away');
  s.coordinator.syncGroup = async () => {
    throw gone;
  };
  await assert.rejects(s.g.joinAndSync(), (e) => e === gone);
  assert.deepEqual(failures.slice(1), [gone]);
  assert.equal(s.g.generationId, 2, 'back to the generation whose assignment it has');
  assert.equal(s.g.memberId, 'm-2', 'the member id the coordinator knows it by now');
});

test("the synced generation should be the one of the sync that gave the assignment, not a concurrent join's", async () => {
  // kafkajs runs one fetcher per broker, and each may rejoin from a fetch that met stale metadata:
  // join X synced generation 2 and refreshes metadata (an assigned partition it did not know),
  // while join Y's JoinGroup answers generation 3, moving kafkajs's live fields.
  const s = staticGroup('pod-8', () => false);
  assert.equal(s.g.synced, undefined, 'nothing synced before the first sync');
  let generation = 2;
  s.coordinator.joinGroup = async () => ({
    generationId: generation,
    leaderId: 'other',
    memberId: 'm-1',
    members: [],
    groupProtocol: 'p',
  });
  let refreshed!: () => void;
  const refresh = new Promise<void>((r) => {
    refreshed = r;
  });
  const { MemberAssignment } = require('kafkajs/src/consumer/assignerProtocol.js');
  s.coordinator.syncGroup = async () => ({
    memberAssignment: MemberAssignment.encode({ version: 0, assignment: { in: [0] } }),
  });
  // X's sync finds partition 0 of 'in' unknown and refreshes the metadata: it waits there.
  s.g.topicsSubscribed = ['in'];
  s.g.generatePartitionsPerSubscribedTopic = () => new Map([['in', []]]);
  s.g.cluster.refreshMetadata = () => refresh;
  await s.g[s.JOIN]();
  const x = s.g[s.SYNC]();
  await new Promise((r) => setImmediate(r));
  generation = 3;
  await s.g[s.JOIN]();
  assert.equal(s.g.generationId, 3, "kafkajs's live field moved at Y's JoinGroup");
  // Y's SyncGroup goes (through X's wrapper of the coordinator's syncGroup) and its sync ends first.
  s.g.generatePartitionsPerSubscribedTopic = () => new Map([['in', [0]]]);
  await s.g[s.SYNC]();
  assert.deepEqual(s.g.synced, { generationId: 3, memberId: 'm-1' }, "Y's sync: generation 3");
  refreshed();
  await x;
  // X's assignment is the one kafkajs holds now, and it is generation 2's: its commits are
  // refused (the member rejoins), never accepted under generation 3 for tasks 3 moved away.
  assert.deepEqual(s.g.synced, { generationId: 2, memberId: 'm-1' }, "X's assignment is generation 2's");
});

test('a heartbeat whose coordinator moved should find the new one and heartbeat there, without a rejoin', async () => {
  const errors = require('kafkajs/src/errors.js');
  const s = staticGroup('pod-6', () => false);
  await s.g.joinAndSync();
  const beats: string[] = [];
  let lookups = 0;
  const coordinatorOf = (name: string, answer: () => unknown) =>
    Object.create({
      nodeId: name,
      heartbeat: async (a: any) => {
        beats.push(`${name}:${a.groupInstanceId}:${a.memberId}:${a.groupGenerationId}`);
        return answer();
      },
    });
  const notCoordinator = new errors.KafkaJSProtocolError({
    type: 'NOT_COORDINATOR_FOR_GROUP',
    code: 16,
    retriable: true,
    message: 'This is not the correct coordinator for this group',
  });
  const moved = coordinatorOf('old', () => {
    throw notCoordinator;
  });
  const current = coordinatorOf('new', () => undefined);
  s.g.coordinator = moved;
  s.g.offsetManager.coordinator = moved;
  s.g.cluster.findGroupCoordinator = async () => {
    lookups++;
    return current;
  };
  await s.g.heartbeat({ interval: 0 });
  assert.deepEqual(
    beats,
    ['old:pod-6:m-1:1', 'new:pod-6:m-1:1'],
    'same member and generation, at the new coordinator',
  );
  assert.equal(s.g.coordinator, current, 'later heartbeats go there');
  assert.equal(s.g.offsetManager.coordinator, current, 'and the offset commits (at-least-once)');
  assert.equal(lookups, 1);

  // Still no other coordinator to follow (a controlled shutdown, the new one not elected yet):
  // a retriable error that is no rebalance error, so kafkajs retries instead of rejoining.
  s.g.coordinator = moved;
  s.g.cluster.findGroupCoordinator = async () => moved;
  const { isRebalancing } = require('kafkajs/src/errors.js');
  await assert.rejects(s.g.heartbeat({ interval: 0 }), (e: any) => {
    assert.equal(isRebalancing(e), false, 'kafkajs does not rejoin on it');
    assert.equal(e.retriable, true);
    assert.equal(e.originalError, notCoordinator);
    return true;
  });

  // The new coordinator refuses the heartbeat (it no longer knows the member): its error is
  // thrown (kafkajs rejoins), and the group stays on the coordinator found.
  const unknown = new errors.KafkaJSProtocolError({
    type: 'UNKNOWN_MEMBER_ID',
    code: 25,
    retriable: false,
    message: 'The coordinator is not aware of this member',
  });
  const refusing = coordinatorOf('refusing', () => {
    throw unknown;
  });
  s.g.coordinator = moved;
  s.g.cluster.findGroupCoordinator = async () => refusing;
  const last = s.g.lastRequest;
  await new Promise((r) => setTimeout(r, 5));
  await assert.rejects(s.g.heartbeat({ interval: 0 }), (e) => e === unknown);
  assert.equal(s.g.coordinator, refusing);
  assert.equal(s.g.lastRequest, last, 'a failed heartbeat is no heartbeat: the next one goes at once');
});

test('a coordinator lookup should run once at a time, not hold heartbeats past its bound, and move the group when it ends late', async () => {
  const errors = require('kafkajs/src/errors.js');
  const { heartbeatFollowing } = await import('../../../src/kafka/kafkajs-static.js');
  const closed = new errors.KafkaJSConnectionClosedError('Closed connection', { host: 'h', port: 1 });
  const dead = { nodeId: 1, heartbeat: async () => Promise.reject(closed) };
  const next = { nodeId: 2, beats: 0, heartbeat: async () => void next.beats++ };
  let lookups = 0;
  let answer: (b: unknown) => void = () => undefined;
  const group = {
    groupId: 'g',
    coordinator: dead as any,
    offsetManager: { coordinator: dead as unknown },
    cluster: {
      findGroupCoordinator: () => {
        lookups++;
        return new Promise((r) => {
          answer = r;
        });
      },
    },
  };
  const t0 = Date.now();
  await assert.rejects(heartbeatFollowing(group, {}, 50), (e) => e === closed);
  assert.ok(Date.now() - t0 >= 40, 'the heartbeat that started the lookup waited for it, up to its bound');
  // The lookup is still running: the next heartbeat fails at once, and starts no second one.
  await assert.rejects(heartbeatFollowing(group, {}, 60_000), (e) => e === closed);
  assert.equal(lookups, 1);
  // It ends: the group moves (it is still on the coordinator that failed).
  answer(next);
  await new Promise((r) => setImmediate(r));
  assert.equal(group.coordinator, next);
  assert.equal(group.offsetManager.coordinator, next);
  await heartbeatFollowing(group, {}, 50);
  assert.equal(next.beats, 1);

  // A lookup that fails leaves the group where it was, and the heartbeat fails with its own error.
  group.coordinator = dead;
  group.cluster.findGroupCoordinator = async () => {
    lookups++;
    throw new errors.KafkaJSConnectionError('Connection error: connect ECONNREFUSED', {
      code: 'ECONNREFUSED',
    });
  };
  await assert.rejects(heartbeatFollowing(group, {}, 60_000), (e) => e === closed);
  assert.equal(group.coordinator, dead);
  assert.equal(lookups, 2);

  // A rebalance, or a coordinator still loading the group, is no move: no lookup.
  for (const [type, code] of [
    ['REBALANCE_IN_PROGRESS', 27],
    ['GROUP_LOAD_IN_PROGRESS', 14],
  ] as const) {
    const refusal = new errors.KafkaJSProtocolError({ type, code, retriable: true, message: type });
    group.coordinator = { nodeId: 3, heartbeat: async () => Promise.reject(refusal) };
    await assert.rejects(heartbeatFollowing(group, {}, 50), (e) => e === refusal);
  }
  assert.equal(lookups, 2, 'no lookup for a rebalance or a loading coordinator');
});

/** kafkajs's consumer restarts itself after a crash only when the deepest `cause` is retriable. */
function kafkajsWouldRestart(e: any): boolean {
  let root = e;
  while (root.cause) root = root.cause;
  return e.name === 'KafkaJSNumberOfRetriesExceeded' || root.retriable === true;
}

test('a rejoin whose coordinator lookup finds no broker should crash the consumer into a restart, not for good', async () => {
  const errors = require('kafkajs/src/errors.js');
  const s = staticGroup('pod-4', () => false);
  // kafkajs's own lookup, failing the way it does while the brokers shut down: every broker
  // asked said "coordinator not available" or refused the connection.
  delete s.g.cluster.findGroupCoordinator;
  let lookups = 0;
  s.g.cluster.findGroupCoordinatorMetadata = async () => {
    lookups++;
    throw new errors.KafkaJSGroupCoordinatorNotFound('Failed to find group coordinator');
  };
  const failed = await s.g.joinAndSync().then(
    () => assert.fail('the join should fail'),
    (e: any) => e,
  );
  assert.ok(lookups >= 1);
  assert.equal(s.calls.length, 0, 'no JoinGroup without a coordinator');
  // What kafkajs's runner hands its crash handler: the join's error, wrapped once more.
  const crash = new errors.KafkaJSNonRetriableError(failed, { cause: failed.cause || failed });
  assert.equal(kafkajsWouldRestart(crash), true, 'kafkajs restarts the consumer');
  assert.match(crash.message, /coordinator of group g could not be found.*Failed to find group coordinator/);

  // Unpatched, the same failure was a crash for good (kafkajs's own classification).
  const unpatched = new errors.KafkaJSNonRetriableError(
    new errors.KafkaJSGroupCoordinatorNotFound('Failed to find group coordinator'),
  );
  assert.equal(
    kafkajsWouldRestart(new errors.KafkaJSNonRetriableError(unpatched, { cause: unpatched })),
    false,
  );
});

test('a coordinator lookup failing for another reason than an unreachable broker should stay non-retriable', async () => {
  const errors = require('kafkajs/src/errors.js');
  const s = staticGroup('pod-5', () => false);
  delete s.g.cluster.findGroupCoordinator;
  s.g.cluster.findGroupCoordinatorMetadata = async () => {
    throw new errors.KafkaJSProtocolError({
      type: 'GROUP_AUTHORIZATION_FAILED',
      code: 30,
      retriable: false,
      message: 'not authorized',
    });
  };
  const failed = await s.g.joinAndSync().then(
    () => assert.fail('the join should fail'),
    (e: any) => e,
  );
  const crash = new errors.KafkaJSNonRetriableError(failed, { cause: failed.cause || failed });
  assert.equal(kafkajsWouldRestart(crash), false);
});

test('isBrokerUnreachable should see connection and coordinator errors through kafkajs wrappers, and nothing else', () => {
  const errors = require('kafkajs/src/errors.js');
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9092'), { code: 'ECONNREFUSED' });
  const conn = new errors.KafkaJSConnectionError('Connection error', { broker: 'b:1', code: 'ECONNREFUSED' });
  assert.equal(isBrokerUnreachable(new errors.KafkaJSNonRetriableError(refused, { cause: refused })), true);
  assert.equal(isBrokerUnreachable(new errors.KafkaJSNumberOfRetriesExceeded(conn, { cause: conn })), true);
  assert.equal(isBrokerUnreachable(new errors.KafkaJSGroupCoordinatorNotFound('x')), true);
  assert.equal(isBrokerUnreachable(new errors.KafkaJSError('x')), false);
  assert.equal(
    isBrokerUnreachable(
      new errors.KafkaJSProtocolError({ type: 'INVALID_GROUP_ID', code: 24, retriable: false, message: 'x' }),
    ),
    false,
  );
});
