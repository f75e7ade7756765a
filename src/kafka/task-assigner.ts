import './kafkajs-preload.js';
import { AssignerProtocol, type PartitionAssigner } from 'kafkajs';

/**
 * Member metadata a worker sends when it joins: the tasks it owns now (for stickiness) and where
 * its HTTP server can be reached (for routing state queries).
 */
export interface MemberInfo {
  tasks: string[];
  http?: string;
  /** Its topology's task layout (`Topology.fingerprint`). */
  layout?: string;
}

/** Maps the group's topic-partitions to tasks: `(subtopology, partition)` → task id. */
export interface TaskLayout {
  /** Sub-topology id of a source topic, or undefined for a topic that is not ours. */
  subtopologyOf(topic: string): number | undefined;
  /**
   * The layout's fingerprint (`Topology.fingerprint`). Given, the leader assigns tasks only to
   * members that sent the same one: each member turns its partitions into task ids with its own
   * topology, so members of a changed one (a rolling deploy) could run one task twice at once.
   */
  readonly fingerprint?: string;
}

export function taskIdOf(subtopology: number, partition: number): string {
  return `${subtopology}_${partition}`;
}

/**
 * The result of one assignment, as plain data so it can be unit tested:
 * member id → task ids.
 */
export function assignTasks(
  members: ReadonlyArray<{ memberId: string; info: MemberInfo }>,
  tasks: readonly string[],
): Map<string, string[]> {
  // Each sub-topology is balanced on its own (as Kafka Streams does): the stateful tasks of a
  // sub-topology spread over the members instead of one member getting all of them.
  const ids = members.map((m) => m.memberId).sort();
  const out = new Map<string, string[]>(ids.map((id) => [id, []]));
  if (ids.length === 0) return out;
  const bySub = new Map<number, string[]>();
  for (const t of tasks) {
    const sub = Number(t.split('_')[0]);
    let l = bySub.get(sub);
    if (!l) bySub.set(sub, (l = []));
    l.push(t);
  }
  for (const sub of [...bySub.keys()].sort((a, b) => a - b)) {
    const plan = assignBalanced(members, bySub.get(sub)!, out);
    for (const [id, ts] of plan) out.get(id)!.push(...ts);
  }
  return out;
}

/**
 * Spreads `tasks` over the members: sticky first (a task stays with its previous owner while the
 * owner is under its limit), then to the member with the fewest of these tasks, then with the
 * smallest total `load`, then the lowest id (deterministic).
 */
function assignBalanced(
  members: ReadonlyArray<{ memberId: string; info: MemberInfo }>,
  tasks: readonly string[],
  load: ReadonlyMap<string, string[]>,
): Map<string, string[]> {
  const ids = members.map((m) => m.memberId).sort();
  const out = new Map<string, string[]>(ids.map((id) => [id, []]));
  const ours = new Set(tasks);
  const sortedTasks = [...tasks].sort((a, b) => {
    const [sa, pa] = a.split('_').map(Number);
    const [sb, pb] = b.split('_').map(Number);
    return pa! - pb! || sa! - sb!;
  });
  const cap = Math.ceil(sortedTasks.length / ids.length);
  const floor = Math.floor(sortedTasks.length / ids.length);
  // Members allowed `cap` tasks: as many as the remainder, the others get `floor`.
  let bigSlots = sortedTasks.length - floor * ids.length;
  const limitOf = new Map<string, number>();
  const taken = new Set<string>();
  const prevOwner = new Map<string, string>();
  for (const m of [...members].sort((a, b) => (a.memberId < b.memberId ? -1 : 1))) {
    for (const t of m.info.tasks) if (ours.has(t) && !prevOwner.has(t)) prevOwner.set(t, m.memberId);
  }
  // Stickiness first: a task stays with its previous owner while the owner is under its limit.
  const prevCount = new Map<string, number>();
  for (const [, owner] of prevOwner) prevCount.set(owner, (prevCount.get(owner) ?? 0) + 1);
  const loadOf = (id: string) => load.get(id)?.length ?? 0;
  const byClaim = [...ids].sort(
    (a, b) => (prevCount.get(b) ?? 0) - (prevCount.get(a) ?? 0) || loadOf(a) - loadOf(b),
  );
  for (const id of byClaim) {
    const wantsBig = (prevCount.get(id) ?? 0) > floor && bigSlots > 0;
    if (wantsBig) bigSlots--;
    limitOf.set(id, wantsBig ? cap : floor);
  }
  for (const t of sortedTasks) {
    const owner = prevOwner.get(t);
    if (owner !== undefined && out.has(owner) && out.get(owner)!.length < limitOf.get(owner)!) {
      out.get(owner)!.push(t);
      taken.add(t);
    }
  }
  // The rest: to the member with the fewest of these tasks, then the least loaded, lowest id first.
  for (const t of sortedTasks) {
    if (taken.has(t)) continue;
    let best: string | undefined;
    for (const id of ids) {
      const n = out.get(id)!.length;
      const lim = limitOf.get(id)!;
      const room = n < lim || (n < cap && bigSlots > 0);
      if (!room) continue;
      const bn = best === undefined ? 0 : out.get(best)!.length;
      if (
        best === undefined ||
        n < bn ||
        (n === bn && (load.get(id)?.length ?? 0) < (load.get(best)?.length ?? 0))
      )
        best = id;
    }
    if (best === undefined) best = ids[0]!;
    const n = out.get(best)!.length;
    if (n >= limitOf.get(best)!) {
      bigSlots--;
      limitOf.set(best, cap);
    }
    out.get(best)!.push(t);
  }
  return out;
}

/**
 * What a member says of itself in its JoinGroup metadata. A member with unreadable metadata, or
 * of another shape (`{}`, `null`, tasks that are not strings: a foreign or older member), simply
 * has no tasks to keep: one such member must not fail the leader's assignment for the group.
 */
export function memberInfoOf(memberMetadata: Buffer): MemberInfo {
  try {
    const md = AssignerProtocol.MemberMetadata.decode(memberMetadata);
    if (!md?.userData || md.userData.length === 0) return { tasks: [] };
    const raw: unknown = JSON.parse(md.userData.toString('utf8'));
    if (typeof raw !== 'object' || raw === null) return { tasks: [] };
    const { tasks, http, layout } = raw as { tasks?: unknown; http?: unknown; layout?: unknown };
    const info: MemberInfo = {
      tasks: Array.isArray(tasks) ? tasks.filter((t): t is string => typeof t === 'string') : [],
    };
    if (typeof http === 'string') info.http = http;
    if (typeof layout === 'string') info.layout = layout;
    return info;
  } catch {
    return { tasks: [] };
  }
}

/**
 * A kafkajs partition assigner that assigns whole tasks: every topic-partition of one task
 * (co-partitioned inputs share a task) goes to the same member, and tasks stay where they were
 * when the group changes (sticky), so state moves only when it must.
 */
export function createTaskAssigner(
  layout: TaskLayout,
  self: () => MemberInfo,
  onMembers?: (members: Map<string, MemberInfo>) => void,
  /** Members left without tasks: their layout is not the leader's (or they sent none). */
  onOtherLayout?: (members: ReadonlyArray<{ memberId: string; layout: string | undefined }>) => void,
): PartitionAssigner {
  return ({ cluster }) => ({
    name: 'SluiceTaskAssigner',
    version: 1,
    async assign({ members, topics }) {
      const infos = members.map((m) => ({ memberId: m.memberId, info: memberInfoOf(m.memberMetadata) }));
      onMembers?.(new Map(infos.map((i) => [i.memberId, i.info])));
      const partitionsOfTask = new Map<string, Array<{ topic: string; partition: number }>>();
      for (const topic of topics) {
        const sub = layout.subtopologyOf(topic);
        if (sub === undefined) continue;
        for (const p of cluster.findTopicPartitionMetadata(topic)) {
          const id = taskIdOf(sub, p.partitionId);
          let l = partitionsOfTask.get(id);
          if (!l) partitionsOfTask.set(id, (l = []));
          l.push({ topic, partition: p.partitionId });
        }
      }
      const own = layout.fingerprint;
      const others = own === undefined ? [] : infos.filter((i) => i.info.layout !== own);
      if (others.length > 0)
        onOtherLayout?.(others.map((i) => ({ memberId: i.memberId, layout: i.info.layout })));
      const plan = assignTasks(others.length === 0 ? infos : infos.filter((i) => i.info.layout === own), [
        ...partitionsOfTask.keys(),
      ]);
      for (const i of others) plan.set(i.memberId, []);
      return [...plan].map(([memberId, taskIds]) => {
        const assignment: Record<string, number[]> = {};
        for (const t of taskIds) {
          for (const { topic, partition } of partitionsOfTask.get(t)!)
            (assignment[topic] ??= []).push(partition);
        }
        return {
          memberId,
          memberAssignment: AssignerProtocol.MemberAssignment.encode({
            version: 1,
            assignment,
            userData: Buffer.alloc(0),
          }),
        };
      });
    },
    protocol({ topics }) {
      return {
        name: 'SluiceTaskAssigner',
        metadata: AssignerProtocol.MemberMetadata.encode({
          version: 1,
          topics,
          userData: Buffer.from(JSON.stringify({ ...self(), layout: layout.fingerprint })),
        }),
      };
    },
  });
}
