import type { SluiceConfig } from '../config/schema.js';
import type { Task } from '../runtime/task.js';
import type { Topology } from '../topology/build.js';
import { INFLIGHT_STATE, storesOfNode } from '../topology/nodes.js';
import type { GroupView } from './group-view.js';

/** A named part of /status supplied by another module (e.g. `overload`); called per request. */
export type StatusSection = () => unknown;

/** What {@link buildStatus} reads of a worker. */
export interface StatusSource {
  readonly app: { readonly id: string };
  readonly config: Readonly<SluiceConfig>;
  readonly topology: Topology;
  readonly state: string;
  readonly tasks: ReadonlyMap<string, Task>;
  readonly lag: ReadonlyMap<string, number>;
  readonly plan: ReadonlyMap<number, number>;
  readonly memberId: string | undefined;
  /** KIP-345 group.instance.id (absent: a dynamic member). */
  readonly groupInstanceId?: string | undefined;
  readonly clientId: string;
  readonly httpAddress: string | undefined;
  readonly group: GroupView;
  readonly opCounts: Float64Array;
  readonly statusSections: ReadonlyMap<string, StatusSection>;
  readiness(): { ready: boolean; reason?: string };
}

/**
 * The /status document. Built from in-memory state only: the group's assignment comes from the
 * {@link GroupView}'s cached snapshot (refreshed in the background at most once a second), so a
 * status request never waits for Kafka.
 */
export function buildStatus(w: StatusSource): Record<string, unknown> {
  const group = w.group.current;
  const tasks = [...w.tasks.values()]
    .sort((a, b) => a.partition - b.partition || a.sub.id - b.sub.id)
    .map((t) => ({
      id: t.id,
      subtopology: t.sub.id,
      partition: t.partition,
      state: t.state,
      topics: t.inputTopics,
      positions: t.positions(),
      lag: Object.fromEntries(t.inputTopics.map((tp) => [tp, w.lag.get(`${tp}:${t.partition}`) ?? null])),
      restore: t.restoreProgress ? { ...t.restoreProgress } : null,
      watermark: t.watermark ?? null,
      // Records in the task's async stages (mapAsync, ...): waiting, running or done, not yet out.
      asyncInFlight: t.async.size,
      idleInputs: t.idleInputs,
      stores: t.sub.stores
        .filter((s) => s.stateName !== '__timers' && s.stateName !== INFLIGHT_STATE)
        .map((s) => s.name),
    }));
  const operators: Array<{ id: number; name: string; kind: string; subtopology: number; records: number }> =
    [];
  for (const s of w.topology.subtopologies)
    for (const n of s.nodes)
      operators.push({
        id: n.id,
        name: n.name,
        kind: n.spec.kind,
        subtopology: s.id,
        records: w.opCounts[n.id] ?? 0,
      });
  const out: Record<string, unknown> = {
    app: w.app.id,
    state: w.state,
    guarantee: w.config.processing.guarantee,
    time: Date.now(),
    worker: {
      memberId: w.memberId ?? null,
      groupInstanceId: w.groupInstanceId ?? null,
      clientId: w.clientId,
      http: w.httpAddress ?? null,
    },
    readiness: w.readiness(),
    group: {
      state: group.state,
      readAt: group.at || null,
      error: group.error ?? null,
      members: group.members.map((m) => ({ ...m, self: m.memberId === w.memberId })),
    },
    tasks,
    partitions: Object.fromEntries(w.plan),
    operators,
  };
  for (const [name, fn] of w.statusSections) {
    try {
      out[name] = fn();
    } catch (e) {
      out[name] = { error: (e as Error).message };
    }
  }
  return out;
}

/** The topology as JSON for the status page: operators with their edges, stores and topics. */
export function topologyJson(t: Topology): Record<string, unknown> {
  const nodes = t.subtopologies.flatMap((s) =>
    s.nodes.map((n) => ({
      id: n.id,
      name: n.name,
      kind: n.spec.kind,
      subtopology: s.id,
      children: n.children.map((c) => c.id),
      topics: n.spec.kind === 'source' ? n.spec.topics : n.spec.kind === 'sink' ? [n.spec.topic] : [],
      internal: n.spec.kind === 'source' || n.spec.kind === 'sink' ? n.spec.internal : false,
      stores: storesOfNode(n)
        .filter((x) => x.stateName !== '__timers' && x.stateName !== INFLIGHT_STATE)
        .map((x) => x.name),
    })),
  );
  return {
    app: t.appId,
    subtopologies: t.subtopologies.map((s) => ({
      id: s.id,
      sourceTopics: s.sourceTopics,
      sinkTopics: s.sinkTopics,
    })),
    repartitionTopics: [...t.repartitionTopics.keys()],
    nodes,
  };
}
