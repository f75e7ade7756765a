/**
 * Static group membership (KIP-345) for kafkajs 2.2.4, installed before kafkajs loads.
 *
 * kafkajs's protocol layer already has JoinGroup v5, SyncGroup v3, Heartbeat v3 and LeaveGroup
 * v3, which carry `group.instance.id`, and negotiates them with Kafka ≥ 2.3 (its lookup takes the
 * highest version both sides implement); but its Broker methods and its ConsumerGroup never pass
 * the id, so every kafkajs consumer is a dynamic member: a restart joins as a new member and
 * costs a rebalance, and a stop always leaves the group. This module changes, at load time:
 *
 * - `Broker.prototype.joinGroup/syncGroup/heartbeat/leaveGroup`: take `groupInstanceId` and pass
 *   it to the request; `leaveGroup` also takes `members` (LeaveGroup v3's batch, for removing
 *   another process's static member: `{ memberId: '', groupInstanceId }`). A static member on a
 *   broker without JoinGroup v5 fails instead of silently joining as a dynamic one. OffsetCommit
 *   is left alone: kafkajs implements it up to v5, and `group.instance.id` came with v7; the
 *   coordinator checks member id and generation, which is enough (exactly-once commits go
 *   through TxnOffsetCommit anyway).
 * - `kafka.consumer({ groupInstanceId, leaveGroupOnStop })` (see the `ConsumerConfig` augmentation
 *   below): kafkajs's `Kafka#consumer` and its consumer factory drop unknown options, so the
 *   patched `Kafka#consumer` hands them over, keyed by the consumer's own cluster object, to
 *   the ConsumerGroup that `run()` creates later.
 * - ConsumerGroup (a subclass replaces kafkajs's export): JoinGroup, SyncGroup and Heartbeat carry
 *   the instance id; a static member's `leave()` sends no LeaveGroup unless `leaveGroupOnStop()`
 *   says so, as the Java consumer does, so a restart within the session timeout gets its
 *   partitions back without a rebalance.
 *
 * Load order matters: kafkajs's consumer factory binds ConsumerGroup when it loads, and kafkajs's
 * index binds the consumer factory; kafkajs-preload.ts imports this module after the two other
 * patches. {@link staticMembershipInstalled} says whether it worked (checked by
 * `assertKafkajsPatched` when a KafkaClient is made).
 */
import { createRequire } from 'node:module';
import { isBrokerUnreachable, someInChain } from './error-chain.js';

declare module 'kafkajs' {
  interface ConsumerConfig {
    /** KIP-345 `group.instance.id` (installed by src/kafka/kafkajs-static.ts); absent: a dynamic member. */
    groupInstanceId?: string;
    /** Asked when the consumer stops: should a static member leave the group (hand its partitions over now)? */
    leaveGroupOnStop?: () => boolean;
    /**
     * Awaited before every JoinGroup (installed by src/kafka/kafkajs-static.ts): the eager
     * protocol's "partitions revoked" moment, as the Java consumer's onPartitionsRevoked before
     * it rejoins. kafkajs has no such callback.
     */
    beforeJoin?: () => Promise<void>;
    /**
     * Called when a rejoin (`joinAndSync`, after `beforeJoin`) failed and kafkajs gave up on it
     * (installed by src/kafka/kafkajs-static.ts): its runner then fetches again for the assignment
     * the member had (a coordinator still loading after a broker restart refuses the JoinGroup
     * that way, and kafkajs retries the join only at the next rebalance signal). What
     * `beforeJoin` stopped must run again for that assignment.
     */
    joinFailed?: (error: unknown) => void;
    /**
     * Called with each kafkajs ConsumerGroup this consumer makes (installed by
     * src/kafka/kafkajs-static.ts): its `generationId`, `memberId` and `groupInstanceId` are the
     * group metadata an exactly-once v2 TxnOffsetCommit carries. kafkajs keeps the object private.
     */
    onGroup?: (group: GroupMembership) => void;
  }
}

/** What a kafkajs ConsumerGroup knows of its membership (its own fields, read live). */
export interface GroupMembership {
  readonly generationId: number | null;
  readonly memberId: string | null;
  readonly groupInstanceId: string | null;
  /**
   * The generation and member id of the SyncGroup that gave the member its current assignment
   * (undefined before the first). Not the live fields above: kafkajs sets those at JoinGroup, and
   * joins run concurrently (one per fetcher, from a fetch that met stale metadata), so a join's
   * assignment can be emitted while another join already moved them to a generation whose
   * assignment this member has not received.
   */
  readonly synced: { generationId: number; memberId: string } | undefined;
  /** A JoinGroup/SyncGroup is under way; kafkajs left the group (background-heartbeat.ts). */
  readonly joining: boolean;
  readonly closed: boolean;
  /** kafkajs's heartbeat: sent when none went for `interval` ms (background-heartbeat.ts). */
  heartbeat(o: { interval: number }): Promise<void>;
  /** A seek of the partition is pending (kafkajs's stale check). */
  hasSeekOffset?(tp: { topic: string; partition: number }): boolean;
}

const require = createRequire(import.meta.url);

/** The error kafkajs raises when another process joined with this member's instance id. */
export const FENCED_INSTANCE_ID = 'FENCED_INSTANCE_ID';

/** JoinGroup's first version with `group_instance_id`. */
const STATIC_JOIN_VERSION = 5;
/** LeaveGroup's first version that takes a batch of members by instance id. */
const BATCH_LEAVE_VERSION = 3;

interface MemberSettings {
  groupInstanceId: string | null;
  leaveGroupOnStop: () => boolean;
  beforeJoin: (() => Promise<void>) | undefined;
  joinFailed: ((error: unknown) => void) | undefined;
  onGroup: ((group: GroupMembership) => void) | undefined;
}

/** Per kafkajs consumer (its cluster object, made by `Kafka#consumer` for that consumer alone). */
const settingsByCluster = new WeakMap<object, MemberSettings>();
/** Set while `Kafka#consumer` runs (synchronously) until its consumer factory takes it. */
let pending: MemberSettings | undefined;

const symbolOf = (o: object, description: string): symbol => {
  const s = Object.getOwnPropertySymbols(o).find((x) => x.description === description);
  if (s === undefined) throw new Error(`kafkajs internals changed: no ${description}`);
  return s;
};

/** The version kafkajs's lookup picks: the highest both kafkajs and the broker implement. */
function negotiated(broker: any, apiKey: number, definition: { versions: string[] }): number {
  const max = broker.versions?.[apiKey]?.maxVersion;
  if (max == null) return -1;
  return Math.min(Math.max(...definition.versions.map(Number)), max);
}

function patchBroker(): void {
  const Broker = require('kafkajs/src/broker/index.js');
  const { requests } = require('kafkajs/src/protocol/requests/index.js');
  const apiKeys = require('kafkajs/src/protocol/requests/apiKeys.js');
  const { KafkaJSNonRetriableError } = require('kafkajs/src/errors.js');
  const { failure, createErrorFromCode } = require('kafkajs/src/protocol/error.js');
  const leaveV3 = require('kafkajs/src/protocol/requests/leaveGroup/v3/request.js');
  const leaveV3Response = require('kafkajs/src/protocol/requests/leaveGroup/v3/response.js');
  const SEND = symbolOf(Broker.prototype, 'private:Broker:sendRequest');
  const p = Broker.prototype;

  p.joinGroup = async function joinGroup(
    this: any,
    {
      groupId,
      sessionTimeout,
      rebalanceTimeout,
      memberId = '',
      groupInstanceId = null,
      protocolType = 'consumer',
      groupProtocols,
    }: any,
  ) {
    if (groupInstanceId != null) {
      const v = negotiated(this, apiKeys.JoinGroup, requests.JoinGroup);
      if (v < STATIC_JOIN_VERSION)
        throw new KafkaJSNonRetriableError(
          `static membership (group.instance.id ${groupInstanceId}) needs JoinGroup v${STATIC_JOIN_VERSION} (Kafka ≥ 2.3); broker ${this.brokerAddress} offers v${v}`,
        );
    }
    const joinGroup = this.lookupRequest(apiKeys.JoinGroup, requests.JoinGroup);
    const makeRequest = (assignedMemberId = memberId) =>
      this[SEND](
        joinGroup({
          groupId,
          sessionTimeout,
          rebalanceTimeout,
          memberId: assignedMemberId,
          groupInstanceId,
          protocolType,
          groupProtocols,
        }),
      );
    try {
      return await makeRequest();
    } catch (error) {
      if ((error as Error).name === 'KafkaJSMemberIdRequired') return makeRequest((error as any).memberId);
      throw error;
    }
  };

  p.syncGroup = async function syncGroup(
    this: any,
    { groupId, generationId, memberId, groupInstanceId = null, groupAssignment }: any,
  ) {
    const syncGroup = this.lookupRequest(apiKeys.SyncGroup, requests.SyncGroup);
    return this[SEND](syncGroup({ groupId, generationId, memberId, groupInstanceId, groupAssignment }));
  };

  p.heartbeat = async function heartbeat(
    this: any,
    { groupId, groupGenerationId, memberId, groupInstanceId = null }: any,
  ) {
    const heartbeat = this.lookupRequest(apiKeys.Heartbeat, requests.Heartbeat);
    return this[SEND](heartbeat({ groupId, groupGenerationId, memberId, groupInstanceId }));
  };

  /**
   * With `members` (LeaveGroup v3): removes those members, each named by member id or, with
   * member id `''`, by instance id; answers every member with its own error code instead of
   * throwing on the first (kafkajs's v3 parser throws).
   */
  p.leaveGroup = async function leaveGroup(
    this: any,
    { groupId, memberId, groupInstanceId = null, members }: any,
  ) {
    if (members === undefined) {
      const leaveGroup = this.lookupRequest(apiKeys.LeaveGroup, requests.LeaveGroup);
      return this[SEND](leaveGroup({ groupId, memberId, groupInstanceId }));
    }
    const v = negotiated(this, apiKeys.LeaveGroup, requests.LeaveGroup);
    if (v < BATCH_LEAVE_VERSION)
      throw new KafkaJSNonRetriableError(
        `removing members by group.instance.id needs LeaveGroup v${BATCH_LEAVE_VERSION} (Kafka ≥ 2.4); broker ${this.brokerAddress} offers v${v}`,
      );
    return this[SEND]({
      request: leaveV3({ groupId, members }),
      response: {
        decode: leaveV3Response.decode,
        parse: async (data: any) => {
          if (failure(data.errorCode)) throw createErrorFromCode(data.errorCode);
          return data;
        },
      },
    });
  };
}

/**
 * kafkajs's coordinator lookup gives up with a non-retriable `KafkaJSGroupCoordinatorNotFound`
 * once every broker it asked failed, even when each failed only because it was shutting down
 * ("coordinator not available", then a refused connection). Raised in a rejoin, that crashed the
 * consumer for good (kafkajs restarts it only when the error's root cause is retriable): a
 * broker restart cost a worker. Such a failure becomes a retriable error without a `cause`, so
 * kafkajs's runner retries or restarts the consumer with its backoff; the original stays on it as
 * `originalError` for the logs.
 */
export function retriableLookup(e: unknown, groupId: string): unknown {
  if (!isBrokerUnreachable(e)) return e;
  const { KafkaJSError } = require('kafkajs/src/errors.js');
  const message = e instanceof Error ? e.message : String(e);
  const err = new KafkaJSError(
    `the coordinator of group ${groupId} could not be found (${message}); the brokers are restarting or unreachable, retrying`,
    { retriable: true },
  );
  err.originalError = e;
  return err;
}

/** A kafkajs ConsumerGroup, as far as {@link heartbeatFollowing} uses it. */
interface FollowingGroup {
  groupId: string;
  coordinator: any;
  cluster: any;
  /** kafkajs's OffsetManager, made at SyncGroup with its own copy of the coordinator. */
  offsetManager?: { coordinator: unknown } | null;
  logger?: { info(message: string, extra?: object): void };
}

/** The coordinator lookup in flight per group: one at a time (kafkajs's own retries run long). */
const lookups = new WeakMap<object, Promise<unknown>>();

/**
 * A heartbeat to the group's coordinator; when that broker is down or no longer the coordinator
 * (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a refused or lost connection: a broker restart
 * moved the group), the coordinator is looked up again and the heartbeat goes there, as Kafka's
 * Java consumer does (it marks the coordinator unknown, finds it, heartbeats on). kafkajs kept
 * the coordinator it joined through: NOT_COORDINATOR made it rejoin (a rebalance of the whole
 * group per member), and a dead coordinator got every heartbeat until the session expired. The
 * new coordinator had loaded the group with its members, but none heartbeat there, so it removed
 * them all a session later and the group rebalanced once per returning member (the cluster
 * soak's 40-77 s output gaps after a broker kill).
 *
 * One lookup runs at a time; the heartbeat that starts it waits for it up to `lookupMs`, later
 * ones fail at once meanwhile (a heartbeat must not hold a batch for long). A lookup that ends
 * late still moves the group, if it is still on the coordinator that failed. The offsets
 * manager (at-least-once commits) moves with it: kafkajs gave it its own copy at SyncGroup. A
 * heartbeat the new coordinator refuses throws its answer (kafkajs rejoins on a rebalance error
 * or an unknown member); with no new coordinator known yet, the error is made retriable
 * ({@link notMoving}), so kafkajs retries rather than rejoins.
 */
export async function heartbeatFollowing(
  group: FollowingGroup,
  payload: object,
  lookupMs: number,
): Promise<void> {
  const from = group.coordinator;
  try {
    await from.heartbeat(payload);
    return;
  } catch (e) {
    if (!isBrokerUnreachable(e) || someInChain(e, (x) => x.type === 'GROUP_LOAD_IN_PROGRESS')) throw e;
    if (group.coordinator !== from) {
      // Another heartbeat's lookup moved the group meanwhile: heartbeat there.
    } else if (lookups.has(group)) {
      throw notMoving(e, group.groupId);
    } else {
      const lookup = Promise.resolve()
        .then(() => group.cluster.findGroupCoordinator({ groupId: group.groupId }))
        .then(
          (found: any) => {
            if (found && group.coordinator === from) {
              group.coordinator = found;
              if (group.offsetManager) group.offsetManager.coordinator = found;
              group.logger?.info('the group coordinator moved; heartbeats and commits follow it', {
                groupId: group.groupId,
                from: from?.nodeId,
                to: found.nodeId,
              });
            }
          },
          () => undefined,
        )
        .finally(() => lookups.delete(group));
      lookups.set(group, lookup);
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        lookup,
        new Promise<void>((r) => {
          timer = setTimeout(r, lookupMs);
        }),
      ]).finally(() => clearTimeout(timer));
      if (group.coordinator === from) throw notMoving(e, group.groupId);
    }
  }
  await group.coordinator.heartbeat(payload).catch((e: unknown) => {
    throw isBrokerUnreachable(e) ? notMoving(e, group.groupId) : e;
  });
}

/**
 * A heartbeat that found no coordinator to follow yet (a controlled shutdown: the old one resigned,
 * the new one is not elected): a retriable error that is no rebalance error, so that kafkajs's
 * runner retries its fetch loop and the next heartbeat looks again, instead of rejoining on
 * NOT_COORDINATOR (a rebalance of the whole group; the soak saw 2 in 9 broker events). A member
 * the coordinator no longer knows still rejoins: its answer is UNKNOWN_MEMBER_ID.
 */
function notMoving(e: unknown, groupId: string): unknown {
  if (!someInChain(e, (x) => x.type === 'NOT_COORDINATOR_FOR_GROUP')) return e;
  const { KafkaJSError } = require('kafkajs/src/errors.js');
  const err = new KafkaJSError(
    `the coordinator of group ${groupId} moved and the new one is not known yet (${(e as Error).message}); heartbeating again`,
    { retriable: true },
  );
  err.originalError = e;
  return err;
}

function patchConsumerGroup(): any {
  const path = require.resolve('kafkajs/src/consumer/consumerGroup.js');
  const ConsumerGroup = require(path);
  const sharedPromiseTo = require('kafkajs/src/utils/sharedPromiseTo.js');
  const {
    events: { HEARTBEAT },
  } = require('kafkajs/src/consumer/instrumentationEvents.js');
  const JOIN = symbolOf(ConsumerGroup.prototype, 'private:ConsumerGroup:join');
  const SYNC = symbolOf(ConsumerGroup.prototype, 'private:ConsumerGroup:sync');

  class StaticConsumerGroup extends ConsumerGroup {
    declare groupInstanceId: string | null;
    declare leaveGroupOnStop: () => boolean;
    declare beforeJoin: (() => Promise<void>) | undefined;
    declare joinFailed: ((error: unknown) => void) | undefined;
    declare joining: boolean;
    declare closed: boolean;
    declare synced: { generationId: number; memberId: string } | undefined;

    constructor(options: any) {
      super(options);
      const s = settingsByCluster.get(options.cluster);
      this.groupInstanceId = s?.groupInstanceId ?? null;
      this.leaveGroupOnStop = s?.leaveGroupOnStop ?? (() => true);
      this.beforeJoin = s?.beforeJoin;
      this.joinFailed = s?.joinFailed;
      this.joining = false;
      this.closed = false;
      this.synced = undefined;
      s?.onGroup?.(this as unknown as GroupMembership);
      // kafkajs's heartbeat, with the instance id (it is a closure made by the constructor), and
      // sent to the coordinator found again when the one it had moved (heartbeatFollowing).
      const self = this as any;
      self[symbolOf(this, 'private:ConsumerGroup:sharedHeartbeat')] = sharedPromiseTo(
        async ({ interval }: { interval: number }) => {
          const { groupId, generationId, memberId, groupInstanceId } = self;
          if (memberId && Date.now() >= self.lastRequest + interval) {
            const payload = { groupId, memberId, groupGenerationId: generationId, groupInstanceId };
            await heartbeatFollowing(self, payload, Math.min(Math.max(1000, interval), 3000));
            self.instrumentationEmitter.emit(HEARTBEAT, payload);
            self.lastRequest = Date.now();
          }
        },
      );
    }

    /**
     * kafkajs's join and sync, retried by kafkajs on a rebalance error or an unknown member id;
     * on any other failure kafkajs gives up and its runner fetches again for the assignment the
     * member had: `joinFailed` says so (once per failed rejoin, not per retry inside it). A
     * JoinGroup that got through before the failure moved kafkajs to a generation whose
     * assignment it never received; the member goes back to the one it has, so that its next
     * heartbeat meets ILLEGAL_GENERATION and kafkajs rejoins at once (with the newer one, the
     * coordinator answers heartbeats while it waits for a SyncGroup that never comes).
     */
    joinAndSync(this: any): Promise<void> {
      const { generationId } = this;
      this.joining = true; // no background heartbeat meanwhile (background-heartbeat.ts)
      return super
        .joinAndSync()
        .catch((e: unknown) => {
          // Not the member id: a static member that rejoins with one its instance no longer has
          // is fenced (FENCED_INSTANCE_ID), and the new one is what the coordinator knows it by.
          if (generationId !== null) this.generationId = generationId;
          this.joinFailed?.(e);
          throw e;
        })
        .finally(() => {
          this.joining = false;
        });
    }

    /** kafkajs's join, with the instance id, after the `beforeJoin` hook. */
    async [JOIN](this: any): Promise<void> {
      // Eager rebalancing: what this member owns is about to be reassigned; let it commit first.
      if (this.beforeJoin) await this.beforeJoin();
      const { groupId, sessionTimeout, rebalanceTimeout, groupInstanceId } = this;
      this.coordinator = await this.cluster.findGroupCoordinator({ groupId }).catch((e: unknown) => {
        throw retriableLookup(e, groupId);
      });
      const groupData = await this.coordinator.joinGroup({
        groupId,
        sessionTimeout,
        rebalanceTimeout,
        memberId: this.memberId || '',
        groupInstanceId,
        groupProtocols: this.assigners.map((assigner: any) =>
          assigner.protocol({ topics: this.topicsSubscribed }),
        ),
      });
      this.generationId = groupData.generationId;
      this.leaderId = groupData.leaderId;
      this.memberId = groupData.memberId;
      this.members = groupData.members;
      this.groupProtocol = groupData.groupProtocol;
    }

    /**
     * kafkajs's sync calls `this.coordinator.syncGroup(...)` once, deep in a long method: for its
     * duration the coordinator (a broker of this consumer's own cluster, which only this group
     * asks to sync) gets a syncGroup that adds the instance id.
     */
    async [SYNC](this: any): Promise<void> {
      const coordinator = this.coordinator;
      const groupInstanceId = this.groupInstanceId;
      const own = Object.hasOwn(coordinator, 'syncGroup');
      const previous = coordinator.syncGroup;
      coordinator.syncGroup = (args: object) => previous.call(coordinator, { ...args, groupInstanceId });
      // kafkajs's sync reads these at its start, synchronously, and sends them: taken here, not
      // from the request (a concurrent join's sync goes through this wrapper too).
      const asked = { generationId: this.generationId, memberId: this.memberId };
      try {
        await (ConsumerGroup.prototype[SYNC] as () => Promise<void>).call(this);
        // kafkajs's sync has assigned the partitions (its last step, no await after it): the
        // assignment GROUP_JOIN emits next is this generation's.
        this.synced = asked;
      } finally {
        if (own) coordinator.syncGroup = previous;
        else delete coordinator.syncGroup;
      }
    }

    /** A static member stays in the group when it stops, unless asked to leave (scale-down). */
    async leave(this: any): Promise<void> {
      this.closed = true; // kafkajs is done with this group: no background heartbeat for it
      const { groupId, memberId, groupInstanceId } = this;
      if (!memberId) return;
      if (groupInstanceId === null || this.leaveGroupOnStop())
        await this.coordinator.leaveGroup({ groupId, memberId, groupInstanceId });
      this.memberId = null;
    }
  }

  const mod = require.cache[path]!;
  mod.exports = StaticConsumerGroup;
  return StaticConsumerGroup;
}

function patchConsumerFactory(): (args: any) => unknown {
  const path = require.resolve('kafkajs/src/consumer/index.js');
  const original = require(path);
  const createConsumer = (args: any) => {
    if (pending !== undefined) settingsByCluster.set(args.cluster, pending);
    pending = undefined;
    return original(args);
  };
  require.cache[path]!.exports = createConsumer;
  return createConsumer;
}

function patchClient(): void {
  const Client = require('kafkajs/src/index.js');
  const original = Client.prototype.consumer;
  Client.prototype.consumer = function consumer(this: unknown, config: any = {}) {
    const id = config.groupInstanceId;
    if (id !== undefined && (typeof id !== 'string' || id.length === 0))
      throw new TypeError('groupInstanceId must be a non-empty string');
    pending = {
      groupInstanceId: id ?? null,
      leaveGroupOnStop: config.leaveGroupOnStop ?? (() => false),
      beforeJoin: config.beforeJoin,
      joinFailed: config.joinFailed,
      onGroup: config.onGroup,
    };
    try {
      return original.call(this, config);
    } finally {
      pending = undefined;
    }
  };
}

/** Why the patch did not install, or undefined when it did. */
export const staticMembershipProblem: string | undefined = (() => {
  const loaded = (m: string) => require.cache[require.resolve(m)] !== undefined;
  try {
    // Each of these binds the next one's export when it loads: they must not be loaded yet.
    if (loaded('kafkajs/src/consumer/index.js')) return 'kafkajs consumer loaded before the patch';
    if (loaded('kafkajs/src/index.js')) return 'kafkajs loaded before the patch';
    patchBroker();
    const Group = patchConsumerGroup();
    const factory = patchConsumerFactory();
    patchClient();
    const check = require('kafkajs/src/consumer/index.js') === factory;
    return check && require('kafkajs/src/consumer/consumerGroup.js') === Group
      ? undefined
      : 'kafkajs modules did not take the patched exports';
  } catch (e) {
    return `patch failed: ${(e as Error).message}`;
  }
})();

/** True when kafkajs's consumers and brokers support `groupInstanceId` (see the module comment). */
export const staticMembershipInstalled: boolean = staticMembershipProblem === undefined;

/** Whether `e` (or an error it wraps) says another process took over this member's instance id. */
export function isFencedInstance(e: unknown): boolean {
  return someInChain(e, (x) => x.type === FENCED_INSTANCE_ID);
}
