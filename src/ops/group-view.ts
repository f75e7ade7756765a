import type { GroupDescription, KafkaAdmin } from '../kafka/admin.js';
import { taskIdOf } from '../kafka/task-assigner.js';
import type { Topology } from '../topology/build.js';

/** One member of the group as the status endpoint and the state-query router see it. */
export interface GroupMember {
  memberId: string;
  clientId: string;
  host: string;
  /** The member's advertised HTTP address (from its join metadata), if it has one. */
  http: string | undefined;
  /** Task ids assigned to it in the current generation. */
  tasks: string[];
}

export interface GroupSnapshot {
  /** Coordinator's group state (`Stable`, `PreparingRebalance`, …), or `unknown` before the first look. */
  state: string;
  members: GroupMember[];
  /** task id → member id. */
  owners: Map<string, string>;
  /** Milliseconds since the epoch when this was read from the coordinator (0: never). */
  at: number;
  error?: string;
}

/**
 * Minimum time between two DescribeGroups requests. Status polls (the status page asks every
 * second, from every open browser tab) and state queries share one cached answer, so the
 * coordinator sees at most one request per second per worker however many clients ask.
 */
export const GROUP_VIEW_MIN_INTERVAL_MS = 1000;

/**
 * The whole group's assignment and advertised HTTP addresses, read from the group coordinator
 * (DescribeGroups) and cached. kafkajs only shows member metadata to the leader, inside the
 * assignor; asking the coordinator works on every member.
 */
export class GroupView {
  readonly #admin: () => Promise<KafkaAdmin>;
  readonly #groupId: string;
  readonly #topology: Topology;
  #snap: GroupSnapshot = { state: 'unknown', members: [], owners: new Map(), at: 0 };
  #inflight: Promise<GroupSnapshot> | undefined;
  #stale = true;
  #closed = false;
  readonly #enabled: () => boolean;

  /**
   * @param enabled whether asking the coordinator makes sense now (the worker has joined the group
   *   and is not stopping); until then the empty snapshot is served.
   */
  constructor(
    admin: () => Promise<KafkaAdmin>,
    groupId: string,
    topology: Topology,
    enabled: () => boolean = () => true,
  ) {
    this.#admin = admin;
    this.#groupId = groupId;
    this.#topology = topology;
    this.#enabled = enabled;
  }

  /** The last snapshot, without waiting (a refresh starts in the background when it is old). */
  get current(): GroupSnapshot {
    if (this.#stale || Date.now() - this.#snap.at >= GROUP_VIEW_MIN_INTERVAL_MS) void this.refresh();
    return this.#snap;
  }

  /** Marks the snapshot out of date (a rebalance happened); the next read refreshes it. */
  invalidate(): void {
    this.#stale = true;
  }

  /**
   * A snapshot at most `maxAgeMs` old (never fresher than one per {@link GROUP_VIEW_MIN_INTERVAL_MS}
   * unless invalidated). Concurrent callers share one request.
   */
  async get(maxAgeMs = GROUP_VIEW_MIN_INTERVAL_MS): Promise<GroupSnapshot> {
    const age = Date.now() - this.#snap.at;
    if (!this.#stale && age < Math.max(maxAgeMs, GROUP_VIEW_MIN_INTERVAL_MS)) return this.#snap;
    return this.refresh();
  }

  /**
   * Waits (at most `timeoutMs`) for the first answer of the coordinator when none came yet, so a
   * first /status read shows the group instead of the empty snapshot. Resolves at once once the
   * group was read, or while asking makes no sense (not joined yet, stopping).
   */
  async firstRead(timeoutMs: number): Promise<void> {
    if (this.#snap.at !== 0 || this.#closed || !this.#enabled()) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.refresh(),
      new Promise<void>((r) => {
        timer = setTimeout(r, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
  }

  /** Stops asking the coordinator (the worker stopped and closed its admin client). */
  close(): void {
    this.#closed = true;
  }

  refresh(): Promise<GroupSnapshot> {
    if (this.#closed || !this.#enabled()) return Promise.resolve(this.#snap);
    this.#inflight ??= this.#read().finally(() => {
      this.#inflight = undefined;
    });
    return this.#inflight;
  }

  async #read(): Promise<GroupSnapshot> {
    this.#stale = false;
    try {
      const d = await (await this.#admin()).describeGroupMembers(this.#groupId);
      this.#snap = snapshotOf(d, this.#topology);
    } catch (e) {
      this.#snap = { ...this.#snap, at: Date.now(), error: (e as Error).message };
    }
    return this.#snap;
  }
}

export function snapshotOf(d: GroupDescription, topology: Pick<Topology, 'subtopologyOf'>): GroupSnapshot {
  const owners = new Map<string, string>();
  const members: GroupMember[] = d.members.map((m) => {
    const tasks = new Set<string>();
    for (const [topic, parts] of Object.entries(m.assignment)) {
      const sub = topology.subtopologyOf(topic);
      if (sub === undefined) continue;
      for (const p of parts) tasks.add(taskIdOf(sub, p));
    }
    for (const t of tasks) owners.set(t, m.memberId);
    return {
      memberId: m.memberId,
      clientId: m.clientId,
      host: m.host,
      http: typeof m.info.http === 'string' ? m.info.http : undefined,
      tasks: [...tasks].sort(),
    };
  });
  members.sort((a, b) => (a.memberId < b.memberId ? -1 : 1));
  return { state: d.state, members, owners, at: Date.now() };
}
