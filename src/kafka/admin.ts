import './kafkajs-preload.js';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Admin, AssignerProtocol, type Kafka } from 'kafkajs';
import { SluiceError } from '../errors.js';
import { isBrokerUnreachable } from './error-chain.js';
import { type OffsetFetchStableResult, protocolError, UNSTABLE_OFFSET_COMMIT } from './kafkajs-txn-v3.js';
import { createKafkajsCluster } from './partition-reader.js';
import type { MemberInfo } from './task-assigner.js';
import { withTimeout } from './timeout.js';
import type { TopicPartitionOffset, TopicSpec } from './types.js';

/** The first wait of {@link KafkaAdmin.committedOffsetsStable} before it asks again; it doubles. */
const STABLE_FIRST_BACKOFF_MS = 50;
/** The longest wait between two asks of {@link KafkaAdmin.committedOffsetsStable}. */
const STABLE_MAX_BACKOFF_MS = 1000;

/** What Sluice asks of Kafka's admin API, in Sluice's terms. */
export class KafkaAdmin {
  readonly #admin: Admin;
  readonly #kafka: Kafka | undefined;
  /** A kafkajs cluster of `#kafka`, connected on first use (see {@link committedOffsetsStable}). */
  #cluster: Promise<any> | undefined;
  /** `kafka`: the client the admin was made from (for requests kafkajs's admin lacks). */
  constructor(admin: Admin, kafka?: Kafka) {
    this.#admin = admin;
    this.#kafka = kafka;
  }

  async listTopics(): Promise<string[]> {
    return this.#admin.listTopics();
  }

  /** Partition count per topic; topics that do not exist are absent from the map. */
  async partitionCounts(topics: readonly string[]): Promise<Map<string, number>> {
    const existing = new Set(await this.#admin.listTopics());
    const wanted = topics.filter((t) => existing.has(t));
    const out = new Map<string, number>();
    if (wanted.length === 0) return out;
    const md = await this.#admin.fetchTopicMetadata({ topics: wanted });
    for (const t of md.topics) out.set(t.name, t.partitions.length);
    return out;
  }

  /**
   * Each topic's `max.message.bytes` as the broker applies it (the topic's own, or the broker's
   * default): the largest record batch it takes. Topics that do not exist are left out.
   */
  async maxMessageBytes(topics: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    // kafkajs fails the whole request when one topic is missing: only the ones that exist.
    const existing = new Set(await this.#admin.listTopics());
    const wanted = topics.filter((t) => existing.has(t));
    if (wanted.length === 0) return out;
    const r = await this.#admin.describeConfigs({
      includeSynonyms: false,
      resources: wanted.map((name) => ({ type: 2 /* TOPIC */, name, configNames: ['max.message.bytes'] })),
    });
    for (const res of r.resources) {
      const v = Number(res.configEntries.find((e) => e.configName === 'max.message.bytes')?.configValue);
      if (res.errorCode === 0 && Number.isSafeInteger(v) && v > 0) out.set(res.resourceName, v);
    }
    return out;
  }

  /** Creates the topics that do not exist yet; returns the names it created. Safe to race. */
  async ensureTopics(specs: readonly TopicSpec[]): Promise<string[]> {
    const existing = new Set(await this.#admin.listTopics());
    const missing = specs.filter((s) => !existing.has(s.topic));
    if (missing.length === 0) return [];
    try {
      await this.#admin.createTopics({
        waitForLeaders: true,
        topics: missing.map((s) => ({
          topic: s.topic,
          numPartitions: s.partitions,
          replicationFactor: s.replicationFactor ?? -1,
          configEntries: Object.entries(s.config ?? {}).map(([name, value]) => ({ name, value })),
        })),
      });
    } catch (e) {
      // Another worker created them first: fine, as long as they exist now.
      const message = String((e as Error).message);
      if (/already exists/i.test(message)) return missing.map((s) => s.topic);
      const factors = [...new Set(missing.map((s) => s.replicationFactor).filter((f) => f !== undefined))];
      if (/replication factor|replicate the partition/i.test(message) && factors.length > 0) {
        throw new SluiceError(
          'SLUICE_KAFKA',
          `cannot create ${missing.map((s) => s.topic).join(', ')} with replication factor ${factors.join('/')}: ${message}. ` +
            'The cluster has fewer live brokers than that; start them, or lower kafka.replicationFactor.',
          { cause: e },
        );
      }
      throw e;
    }
    return missing.map((s) => s.topic);
  }

  /** Brokers the cluster lists as live in its metadata. */
  async brokerCount(): Promise<number> {
    return (await this.#admin.describeCluster()).brokers.length;
  }

  async deleteTopics(topics: readonly string[]): Promise<void> {
    const existing = new Set(await this.#admin.listTopics());
    const present = topics.filter((t) => existing.has(t));
    if (present.length > 0) await this.#admin.deleteTopics({ topics: present, timeout: 30_000 });
  }

  /** Log-end offsets (high watermarks) and log-start offsets of every partition of a topic. */
  async offsets(topic: string): Promise<Array<{ partition: number; high: string; low: string }>> {
    const r = await this.#admin.fetchTopicOffsets(topic);
    return r.map((p) => ({ partition: p.partition, high: p.high, low: p.low }));
  }

  /** The group's committed offsets (`-1` where none). */
  async committedOffsets(groupId: string, topics: readonly string[]): Promise<TopicPartitionOffset[]> {
    const r = await this.#admin.fetchOffsets({ groupId, topics: [...topics] });
    return r.flatMap((t) =>
      t.partitions.map((p) => ({
        topic: t.topic,
        partition: p.partition,
        offset: p.offset,
        metadata: p.metadata ?? null,
      })),
    );
  }

  /**
   * The group's committed offsets of the partitions given (`-1` where none), as
   * {@link committedOffsets} answers them, but never one that an open transaction is about to
   * replace: OffsetFetch v7 with `require_stable` (kafkajs-txn-v3.ts), which answers such a
   * partition with UNSTABLE_OFFSET_COMMIT until that transaction commits or aborts. A task that
   * started from the older offset would process again what the transaction's records already
   * hold (exactly-once v2, where one transaction carries the offsets of many tasks). Asks again
   * after 50 ms, doubling to 1 s, until `timeoutMs` has passed, then throws `SLUICE_KAFKA` naming
   * the partitions still unstable; a coordinator that moved, is loading or is unreachable is
   * looked up anew within the same time. Any other error of the group or of a partition throws
   * at once (a partition's carries its `topic` and `partition`). Kafka ≥ 2.5.
   */
  async committedOffsetsStable(
    groupId: string,
    topicPartitions: ReadonlyArray<{ topic: string; partitions: readonly number[] }>,
    opts: { timeoutMs: number },
  ): Promise<TopicPartitionOffset[]> {
    const deadline = Date.now() + opts.timeoutMs;
    const topics = topicPartitions.map((t) => ({
      topic: t.topic,
      partitions: t.partitions.map((partition) => ({ partition })),
    }));
    let coordinator: any;
    const ask = async (): Promise<OffsetFetchStableResult> => {
      const cluster = await this.#groupCluster();
      coordinator ??= await cluster.findGroupCoordinator({ groupId });
      return coordinator.offsetFetchStable({ groupId, topics });
    };
    const expired = new Error('expired');
    let unstable: string[] = [];
    let lastError: unknown;
    const gaveUp = () => {
      const why =
        unstable.length > 0
          ? `${unstable.join(', ')} stayed unstable (UNSTABLE_OFFSET_COMMIT: a transaction holding offsets for ${unstable.length === 1 ? 'it' : 'them'} is still open)`
          : `no answer from the group coordinator${lastError === undefined ? '' : ` (${(lastError as Error).message})`}`;
      return new SluiceError(
        'SLUICE_KAFKA',
        `group ${groupId}'s committed offsets: ${why} after ${opts.timeoutMs} ms`,
        { retriable: true, ...(lastError === undefined ? {} : { cause: lastError }) },
      );
    };
    for (let backoff = STABLE_FIRST_BACKOFF_MS; ; backoff = Math.min(backoff * 2, STABLE_MAX_BACKOFF_MS)) {
      try {
        const r = await withTimeout(ask(), deadline - Date.now(), () => expired);
        const out: TopicPartitionOffset[] = [];
        const now: string[] = [];
        for (const t of r.responses)
          for (const p of t.partitions) {
            if (p.errorCode === UNSTABLE_OFFSET_COMMIT) now.push(`${t.topic}:${p.partition}`);
            else if (p.errorCode !== 0)
              throw Object.assign(protocolError(p.errorCode), { topic: t.topic, partition: p.partition });
            else
              out.push({
                topic: t.topic,
                partition: p.partition,
                offset: p.offset,
                metadata: p.metadata || null,
              });
          }
        if (now.length === 0) return out;
        unstable = now;
        lastError = undefined;
      } catch (e) {
        if (e === expired) throw gaveUp();
        // NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, a lost connection.
        if (!isBrokerUnreachable(e)) throw e;
        coordinator = undefined;
        lastError = e;
      }
      const left = deadline - Date.now();
      if (left <= 0) throw gaveUp();
      await sleep(Math.min(backoff, left));
    }
  }

  /**
   * A kafkajs cluster of this admin's client (kafkajs's admin keeps its own private), connected on
   * first use and until {@link close}; a failed connect is forgotten, so the next call tries again.
   */
  #groupCluster(): Promise<any> {
    const kafka = this.#kafka;
    if (!kafka) throw new Error('committedOffsetsStable needs the KafkaAdmin made by KafkaClient.admin()');
    if (this.#cluster === undefined) {
      const p = (async () => {
        const cluster = createKafkajsCluster(kafka);
        await cluster.connect();
        return cluster;
      })();
      this.#cluster = p;
      p.catch(() => {
        if (this.#cluster === p) this.#cluster = undefined;
      });
    }
    return this.#cluster;
  }

  /** Deletes the records of `topic` before `offset` in each partition given (Kafka's DeleteRecords). */
  async deleteRecordsBefore(topic: string, partitions: ReadonlyArray<{ partition: number; offset: string }>) {
    await this.#admin.deleteTopicRecords({ topic, partitions: [...partitions] });
  }

  async deleteGroup(groupId: string): Promise<void> {
    try {
      await this.#admin.deleteGroups([groupId]);
    } catch (e) {
      if (
        !/does not exist|GROUP_ID_NOT_FOUND|not found/i.test(
          JSON.stringify((e as any).groups ?? (e as Error).message),
        )
      )
        throw e;
    }
  }

  async describeGroup(groupId: string): Promise<{ state: string; members: number }> {
    const r = await this.#admin.describeGroups([groupId]);
    const g = r.groups[0]!;
    return { state: g.state, members: g.members.length };
  }

  /**
   * The group's members as the coordinator knows them: each one's join metadata (our
   * {@link MemberInfo}: tasks and HTTP address) and its current assignment. One DescribeGroups
   * request; callers cache it.
   */
  async describeGroupMembers(groupId: string): Promise<GroupDescription> {
    const r = await this.#admin.describeGroups([groupId]);
    const g = r.groups[0]!;
    return {
      state: g.state,
      protocol: g.protocol,
      members: g.members.map((m) => {
        let info: MemberInfo = { tasks: [] };
        let assignment: Record<string, number[]> = {};
        try {
          const md = AssignerProtocol.MemberMetadata.decode(m.memberMetadata);
          if (md?.userData && md.userData.length > 0) info = JSON.parse(md.userData.toString('utf8'));
        } catch {
          // Another client's metadata (or none yet): no tasks, no address.
        }
        try {
          if (m.memberAssignment && m.memberAssignment.length > 0)
            assignment = AssignerProtocol.MemberAssignment.decode(m.memberAssignment)?.assignment ?? {};
        } catch {
          // Mid-rebalance the assignment can be empty.
        }
        return { memberId: m.memberId, clientId: m.clientId, host: m.clientHost, info, assignment };
      }),
    };
  }

  /**
   * Removes static members (KIP-345) from a group at once: LeaveGroup v3 with
   * `{ memberId: '', groupInstanceId }` to the group coordinator, what the Java AdminClient's
   * `removeMembersFromConsumerGroup` sends. The coordinator rebalances the group now instead of
   * waiting for the member's session timeout. Answers each id, with the error for that id when it
   * was not removed (`UNKNOWN_MEMBER_ID`: the group has no member with it).
   */
  async removeStaticMembers(groupId: string, groupInstanceIds: readonly string[]): Promise<RemovedMember[]> {
    if (!this.#kafka) throw new Error('removeStaticMembers needs the KafkaAdmin made by KafkaClient.admin()');
    const { createErrorFromCode, failure } = require('kafkajs/src/protocol/error.js');
    const cluster = createKafkajsCluster(this.#kafka);
    await cluster.connect();
    try {
      const coordinator = await cluster.findGroupCoordinator({ groupId });
      const r = await coordinator.leaveGroup({
        groupId,
        members: groupInstanceIds.map((groupInstanceId) => ({ memberId: '', groupInstanceId })),
      });
      return (r.members as Array<{ memberId: string; groupInstanceId: string; errorCode: number }>).map(
        (m) => ({
          groupInstanceId: m.groupInstanceId,
          memberId: m.memberId,
          ...(failure(m.errorCode) ? { error: String(createErrorFromCode(m.errorCode).type) } : {}),
        }),
      );
    } finally {
      await cluster.disconnect();
    }
  }

  async close(): Promise<void> {
    const cluster = this.#cluster;
    this.#cluster = undefined;
    await Promise.all([
      this.#admin.disconnect(),
      cluster?.then((c) => c.disconnect()).catch(() => undefined),
    ]);
  }
}

const require = createRequire(import.meta.url);

/** One static member {@link KafkaAdmin.removeStaticMembers} removed, or could not. */
export interface RemovedMember {
  groupInstanceId: string;
  /** The member id as the coordinator echoes it (empty: the member was named by instance id). */
  memberId: string;
  /** kafkajs's error type for this member (e.g. `UNKNOWN_MEMBER_ID`: no such instance), or absent. */
  error?: string;
}

export interface GroupDescription {
  /** Coordinator's group state: `Stable`, `PreparingRebalance`, `CompletingRebalance`, `Empty`, `Dead`. */
  state: string;
  protocol: string;
  members: Array<{
    memberId: string;
    clientId: string;
    host: string;
    info: MemberInfo;
    /** topic → partitions, as assigned in the current generation. */
    assignment: Record<string, number[]>;
  }>;
}
