import './kafkajs-preload.js';
import { createRequire } from 'node:module';
import type { Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import { SluiceError } from '../errors.js';
import type { Logger } from '../ops/logger.js';
import { BackgroundHeartbeat } from './background-heartbeat.js';
import { FetchPositions, type FetchVerdict, MAX_DROPS } from './fetch-positions.js';
import { FETCH_GUARD, type FetchGuard } from './kafkajs-fetch-guard.js';
import { type GroupMembership, isFencedInstance } from './kafkajs-static.js';
import { OffsetCommits } from './offset-commits.js';
import { createTaskAssigner, type MemberInfo, type TaskLayout } from './task-assigner.js';
import type { GroupMetadata, InRecord, KafkaSettings, TopicPartitionOffset } from './types.js';

const require = createRequire(import.meta.url);
const { KafkaJSError } = require('kafkajs') as typeof import('kafkajs');

/**
 * What a batch handler throws to make kafkajs rejoin the group: its runner rejoins on an error
 * whose type is REBALANCE_IN_PROGRESS (`isRebalancing`), exactly as when a heartbeat says so.
 */
function rejoinError(): Error {
  return Object.assign(
    new KafkaJSError('sluice: a task migrated, rejoining the group', { retriable: true }),
    {
      type: 'REBALANCE_IN_PROGRESS',
    },
  );
}

/** The offset before a batch's first record (where its partition's position stays if it is not processed). */
export const beforeBatch = (b: Pick<BatchContext, 'records'>): string =>
  (BigInt(b.records[0]!.offset) - 1n).toString();

export interface BatchContext {
  topic: string;
  partition: number;
  records: InRecord[];
  highWatermark: string;
  /**
   * The last offset this fetch covered, transaction markers and aborted records included (they
   * are not in `records`): the position after the batch is this + 1, whatever `records` ends with.
   */
  fetchedTo: string;
  /** True when a seek is pending for this partition: the batch was fetched from the old position. */
  isStale(): boolean;
  /** Marks an offset as consumed in kafkajs's own position tracking. */
  resolveOffset(offset: string): void;
  heartbeat(): Promise<void>;
}

export interface GroupConsumerOptions {
  groupId: string;
  topics: readonly string[];
  readCommitted: boolean;
  /** Partitions processed at once (kafkajs partitionsConsumedConcurrently). */
  concurrency: number;
  maxBytesPerPartition: number;
  layout: TaskLayout;
  memberInfo: () => MemberInfo;
  onMembers?: (members: Map<string, MemberInfo>) => void;
  /**
   * KIP-345 `group.instance.id`: a static member keeps its place (and its partitions) across a
   * restart within the session timeout, and does not leave the group when it stops unless
   * {@link GroupConsumer.stop} is asked to. Absent: a dynamic member, which leaves on stop.
   */
  groupInstanceId?: string | undefined;
  /**
   * Awaited before every JoinGroup, while no batch runs: under the eager protocol everything this
   * member owns may move, so it checkpoints its tasks here, before the group can hand them to
   * another member (whose fence would abort a checkpoint still in flight).
   */
  beforeRejoin?: () => Promise<void>;
  /**
   * kafkajs gave a rejoin up (e.g. a JoinGroup refused by a coordinator still loading): the member
   * keeps the assignment it had, and kafkajs fetches for it again (it retries the join only at the
   * next rebalance signal).
   */
  rejoinFailed?: () => void;
}

export interface GroupHandlers {
  onAssignment(
    assigned: Array<{ topic: string; partition: number }>,
    member?: { memberId: string; leaderId: string; isLeader: boolean },
  ): void;
  onBatch(batch: BatchContext): Promise<void>;
  /**
   * A fetch that held only transaction markers or aborted records: kafkajs moves past it without
   * calling onBatch. `lastOffset` is its last offset (the position is now lastOffset + 1).
   */
  onSkipped?(topic: string, partition: number, lastOffset: string, highWatermark: string): void;
  /** kafkajs gave up (after its own retries) and will not restart by itself. */
  onFatal(error: Error): void;
}

/** A consumer-group member, reading whole tasks as assigned by {@link createTaskAssigner}. */
export class GroupConsumer {
  readonly #consumer: Consumer;
  readonly #opts: GroupConsumerOptions;
  readonly #logger: Logger;
  #rejoin = false;
  #leaveOnStop = false;
  #fenced = false;
  /** kafkajs's ConsumerGroup of the current run (kafkajs-static.ts hands it over). */
  #group: GroupMembership | undefined;
  /** Heartbeats while the fetch loop waits on a broker (background-heartbeat.ts). */
  readonly #beat: BackgroundHeartbeat;
  /** Where each partition's next fetch starts, to drop a batch fetched before a seek (fetch-positions.ts). */
  readonly #positions = new FetchPositions(
    (topic, partition) => this.#group?.hasSeekOffset?.({ topic, partition }) === true,
  );

  constructor(kafka: Kafka, settings: KafkaSettings, opts: GroupConsumerOptions, logger: Logger) {
    this.#opts = opts;
    this.#logger = logger;
    const rebalanceTimeout = Math.max(60_000, settings.sessionTimeoutMs * 2);
    this.#beat = new BackgroundHeartbeat({
      intervalMs: settings.heartbeatIntervalMs,
      // Java's max.poll.interval.ms is also the longest a rebalance waits for a member to rejoin.
      maxHandlerMs: rebalanceTimeout,
      group: () => this.#group,
    });
    this.#consumer = kafka.consumer({
      groupId: opts.groupId,
      readUncommitted: !opts.readCommitted,
      sessionTimeout: settings.sessionTimeoutMs,
      rebalanceTimeout,
      heartbeatInterval: settings.heartbeatIntervalMs,
      maxBytesPerPartition: opts.maxBytesPerPartition,
      maxWaitTimeInMs: 100,
      allowAutoTopicCreation: false,
      partitionAssigners: [
        createTaskAssigner(opts.layout, opts.memberInfo, opts.onMembers, (others) =>
          logger.warn(
            { members: others, layout: opts.layout.fingerprint },
            'members of another topology get no tasks until they run this one: each task must have one owner (a rolling deploy of a changed topology finishes as they restart)',
          ),
        ),
      ],
      retry: { retries: 1000, initialRetryTime: 300, maxRetryTime: 10_000 },
      ...(opts.beforeRejoin === undefined ? {} : { beforeJoin: opts.beforeRejoin }),
      ...(opts.rejoinFailed === undefined ? {} : { joinFailed: opts.rejoinFailed }),
      onGroup: (g) => {
        this.#group = g;
        (g as { [FETCH_GUARD]?: FetchGuard })[FETCH_GUARD] = this.#guard;
      },
      ...(opts.groupInstanceId === undefined
        ? {}
        : { groupInstanceId: opts.groupInstanceId, leaveGroupOnStop: () => this.#leaveOnStop }),
    });
  }

  async start(h: GroupHandlers): Promise<void> {
    const c = this.#consumer;
    c.on(c.events.GROUP_JOIN, (e) => {
      const assigned: Array<{ topic: string; partition: number }> = [];
      for (const [topic, parts] of Object.entries(e.payload.memberAssignment as Record<string, number[]>)) {
        for (const partition of parts) assigned.push({ topic, partition });
      }
      // A new generation: the positions come again from the tasks' seeks and the batches taken.
      this.#positions.clear();
      // This join is the rejoin a migration asked for (maybe during the join itself).
      this.#rejoin = false;
      this.#beat.joined();
      const p = e.payload as { memberId: string; leaderId: string; isLeader: boolean };
      h.onAssignment(assigned, { memberId: p.memberId, leaderId: p.leaderId, isLeader: p.isLeader });
    });
    c.on(c.events.END_BATCH_PROCESS, (e) => {
      const b = e.payload as {
        topic: string;
        partition: number;
        batchSize: number;
        lastOffset: string;
        highWatermark: string;
      };
      if (b.batchSize !== 0) return;
      // kafkajs resolved it itself: markers or aborted records only.
      this.#positions.resolved(b.topic, b.partition, b.lastOffset);
      h.onSkipped?.(b.topic, b.partition, b.lastOffset, b.highWatermark);
    });
    c.on(c.events.CRASH, (e) => {
      this.#positions.clear();
      this.#beat.pause(); // until the restarted consumer joins
      const err = e.payload.error as Error;
      // Another process joined with our instance id: rejoining would only fence it in turn.
      if (isFencedInstance(err)) {
        // The id is another process's now: never send it a LeaveGroup on the way out.
        this.#fenced = true;
        h.onFatal(fencedError(this.#opts, err));
      } else if (!e.payload.restart) h.onFatal(err);
      else this.#logger.warn({ err }, 'consumer crashed, kafkajs restarts it');
    });
    await c.connect();
    for (const topic of this.#opts.topics) await c.subscribe({ topic, fromBeginning: true });
    await c.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: this.#opts.concurrency,
      eachBatch: async (p: EachBatchPayload) => {
        if (this.#rejoin) {
          this.#rejoin = false;
          throw rejoinError();
        }
        const { topic, partition } = p.batch;
        const messages = p.batch.messages;
        const lastOffset = messages[messages.length - 1]?.offset;
        const fetchedTo = p.batch.lastOffset();
        await this.#beat.handling(() =>
          h.onBatch({
            topic,
            partition,
            records: messages as InRecord[],
            highWatermark: p.batch.highWatermark,
            fetchedTo,
            isStale: this.#staleness(p),
            resolveOffset: (offset) => {
              // kafkajs resolves the batch's last record as the end of the fetch, markers included.
              this.#positions.resolved(topic, partition, offset === lastOffset ? fetchedTo : offset);
              p.resolveOffset(offset);
            },
            heartbeat: p.heartbeat,
          }),
        );
      },
    });
    this.#beat.start();
  }

  /**
   * The generation and member id the member's current assignment was synced in, and its instance
   * id (undefined before the first): what an exactly-once v2 TxnOffsetCommit carries, so that the
   * coordinator refuses a commit of a member that is no longer in the group's current generation
   * (KIP-447). Not kafkajs's live fields, which a concurrent join moves at its JoinGroup, before
   * this member knows what that generation assigns it (GroupMembership.synced).
   */
  groupMetadata(): GroupMetadata | undefined {
    const s = this.#group?.synced;
    if (s === undefined || s.memberId == null || s.generationId == null || s.generationId < 0)
      return undefined;
    return {
      generationId: s.generationId,
      memberId: s.memberId,
      groupInstanceId: this.#group!.groupInstanceId,
    };
  }

  /** At-least-once commits through the group, the tasks' merged into one request at a time. */
  readonly #offsetCommits = new OffsetCommits({
    commit: (offsets) => this.#consumer.commitOffsets(offsets),
    generation: () => this.groupMetadata()?.generationId,
  });

  /** Commits offsets through the group (at-least-once). */
  commitOffsets(offsets: readonly TopicPartitionOffset[]): Promise<void> {
    return this.#offsetCommits.commit(offsets);
  }

  /**
   * Makes this member rejoin the group (a new generation) at the next batch: a task of it was
   * fenced by a newer owner, so its view of the assignment is stale. kafkajs has no call for it;
   * the next batch handler throws the error its runner rejoins on.
   */
  requestRejoin(): void {
    this.#rejoin = true;
  }

  seek(topic: string, partition: number, offset: string): void {
    this.#consumer.seek({ topic, partition, offset });
    this.#positions.sought(topic, partition, offset);
  }

  /**
   * A batch's `isStale`: kafkajs's (a seek is pending), or fetched from beyond the partition's
   * position ({@link #takes}). Asked when the handler is about to process (after a restoring task
   * is ready), so it sees the seeks made meanwhile; a drop or a gap is decided once per batch.
   */
  #staleness(p: EachBatchPayload): () => boolean {
    const { topic, partition } = p.batch;
    // kafkajs's Batch keeps the offset its fetch asked for; its typings leave it out.
    const fetchedOffset = String((p.batch as unknown as { fetchedOffset: string }).fetchedOffset);
    let settled: boolean | undefined;
    return () => {
      if (settled !== undefined) return settled || p.isStale();
      if (p.isStale()) return true;
      const v = this.#positions.check(topic, partition, fetchedOffset);
      if (v.kind !== 'take') settled = !this.#takes(topic, partition, fetchedOffset, v);
      return settled === true;
    };
  }

  /** kafkajs-fetch-guard.ts's hooks: a batch kafkajs would resolve itself, a reset position. */
  readonly #guard: FetchGuard = {
    reset: (topic, partition, offset) => this.#positions.reset(topic, partition, offset),
    takeSkipped: (topic, partition, fetchedOffset) => {
      // The seek sets the position; kafkajs resolving this batch first would change nothing.
      if (this.#positions.seekPending(topic, partition)) return false;
      return this.#takes(
        topic,
        partition,
        fetchedOffset,
        this.#positions.check(topic, partition, fetchedOffset),
      );
    },
  };

  /**
   * Acts on a verdict of fetch-positions.ts: a batch fetched from beyond the position is dropped
   * and the partition sought back there; one beyond it after several seeks back is taken.
   */
  #takes(topic: string, partition: number, fetchedOffset: string, v: FetchVerdict): boolean {
    if (v.kind === 'take') return true;
    if (v.kind === 'gap') {
      this.#logger.warn(
        { topic, partition, from: v.from, to: v.to },
        `batches kept coming from beyond the partition's position after ${MAX_DROPS} seeks back: going on from the fetched offset, the records between unread`,
      );
      return true;
    }
    this.#logger.warn(
      { topic, partition, fetchedOffset, position: v.to },
      "a batch fetched from beyond the partition's position (a fetch made before a seek) is dropped, and the partition sought back to it",
    );
    this.#consumer.seek({ topic, partition, offset: v.to });
    return false;
  }

  pause(topic: string, partitions: number[]): void {
    this.#consumer.pause([{ topic, partitions }]);
  }

  resume(topic: string, partitions: number[]): void {
    this.#consumer.resume([{ topic, partitions }]);
  }

  /**
   * Stops consuming. A dynamic member leaves the group (its partitions go to the others at once);
   * a static one keeps its place until its session times out, so that a restart gets its
   * partitions back without a rebalance, unless `leave` asks it to leave (scale-down).
   */
  async stop(opts: { leave?: boolean } = {}): Promise<void> {
    this.#leaveOnStop = opts.leave === true && !this.#fenced;
    if (this.#opts.groupInstanceId !== undefined)
      this.#logger.info(
        { groupInstanceId: this.#opts.groupInstanceId, leave: this.#leaveOnStop },
        this.#fenced
          ? 'fenced static member stopping: its group.instance.id is another worker’s now'
          : this.#leaveOnStop
            ? 'static member leaving the group: its tasks move to the other workers now'
            : 'static member stopping without leaving the group: a restart within the session timeout gets its tasks back',
      );
    this.#beat.stop();
    await this.#consumer.disconnect();
  }
}

function fencedError(opts: GroupConsumerOptions, cause: Error): SluiceError {
  return new SluiceError(
    'SLUICE_FENCED_INSTANCE',
    `another worker joined group ${opts.groupId} with this worker's group.instance.id ${opts.groupInstanceId}, and the coordinator fenced this one: give every worker its own kafka.groupInstanceId (or its own state.dir)`,
    { cause },
  );
}
