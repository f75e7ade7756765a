import { TopologyError } from '../errors.js';
import { jsonHash } from './json-hash.js';
import { type GraphNode, type StoreSpec, storesOfNode } from './nodes.js';

export interface SubTopology {
  readonly id: number;
  /** Input topics: external sources and repartition topics read by this sub-topology. */
  readonly sourceTopics: readonly string[];
  /** Source node per topic. */
  readonly sources: ReadonlyMap<string, GraphNode>;
  readonly nodes: readonly GraphNode[];
  readonly stores: readonly StoreSpec[];
  /** Output topics: user sinks and repartition topics written by this sub-topology. */
  readonly sinkTopics: readonly string[];
}

export interface Topology {
  readonly appId: string;
  readonly subtopologies: readonly SubTopology[];
  /** Repartition topics: name → the sub-topology whose source partitions they must match. */
  readonly repartitionTopics: ReadonlyMap<string, { readsFrom: number; writtenBy: number }>;
  /** Every store with its changelog topic. */
  readonly stores: ReadonlyArray<StoreSpec & { changelog: string; subtopology: number }>;
  subtopologyOf(topic: string): number | undefined;
  /**
   * Names how input partitions map to tasks (each sub-topology's id and source topics): two
   * builds with the same fingerprint make the same task of a partition. Workers send it when they
   * join, and the group's leader assigns tasks only to workers with its own (task-assigner.ts).
   */
  readonly fingerprint: string;
  /**
   * Operators whose state or topics hang on a name the DSL made up from their position: adding an
   * operator before one of them renames its stores (so their changelogs: the state is lost on a
   * redeploy) or its repartition topic (orphaned). One message each; name them (`{ name }`).
   */
  readonly warnings: readonly string[];
  /** A text picture of the topology, for `sluice topology` and the logs. */
  describe(): string;
}

export function changelogTopic(appId: string, store: string): string {
  return `${appId}-${store}-changelog`;
}

export function repartitionTopic(appId: string, name: string): string {
  return `${appId}-${name}-repartition`;
}

/**
 * Splits the graph into sub-topologies: the connected parts of the graph once the edges through
 * repartition topics are cut. Sources that meet (merge, join) end up in one sub-topology and so
 * in one task per partition.
 */
export function buildTopology(appId: string, nodes: readonly GraphNode[]): Topology {
  if (nodes.length === 0) throw new TopologyError(`app ${appId} has no streams`);
  const parent = nodes.map((n) => n.id);
  const find = (i: number): number => {
    while (parent[i] !== i) i = parent[i] = parent[parent[i]!]!;
    return i;
  };
  const union = (a: number, b: number) => {
    const ra = find(a);
    const rb = find(b);
    if (ra !== rb) parent[Math.max(ra, rb)] = Math.min(ra, rb);
  };
  for (const n of nodes) for (const c of n.children) union(n.id, c.id);

  const groups = new Map<number, GraphNode[]>();
  for (const n of nodes) {
    const r = find(n.id);
    let g = groups.get(r);
    if (!g) groups.set(r, (g = []));
    g.push(n);
  }
  const subtopologies: SubTopology[] = [];
  const subOfTopic = new Map<string, number>();
  const storeList: Array<StoreSpec & { changelog: string; subtopology: number }> = [];
  const storeNames = new Set<string>();
  const sinkOwner = new Map<string, number>();
  // Every problem of the definition, reported together (a fix-and-retry per problem is slow).
  const problems: string[] = [];
  for (const group of [...groups.values()].sort((a, b) => a[0]!.id - b[0]!.id)) {
    const id = subtopologies.length;
    const sources = new Map<string, GraphNode>();
    const stores: StoreSpec[] = [];
    const sinkTopics: string[] = [];
    for (const n of group) {
      if (n.spec.kind === 'source') {
        for (const t of n.spec.topics) {
          // The second reader still counts as its chain's source (no "no source" besides).
          if (subOfTopic.has(t)) problems.push(`topic ${t} is read by two streams; read it once and branch`);
          else subOfTopic.set(t, id);
          sources.set(t, n);
        }
      } else if (n.spec.kind === 'sink') {
        sinkTopics.push(n.spec.topic);
        if (n.spec.internal) sinkOwner.set(n.spec.topic, id);
      } else if (n.spec.kind === 'late') {
        if (n.spec.topic !== undefined) sinkTopics.push(n.spec.topic);
      } else {
        for (const s of storesOfNode(n)) {
          if (storeNames.has(s.name)) {
            problems.push(`duplicate store name ${s.name}`);
            continue;
          }
          storeNames.add(s.name);
          stores.push(s);
          storeList.push({ ...s, changelog: changelogTopic(appId, s.name), subtopology: id });
        }
      }
    }
    if (sources.size === 0)
      problems.push(`an operator chain has no source (its first operator: ${group[0]!.name})`);
    subtopologies.push({ id, sourceTopics: [...sources.keys()], sources, nodes: group, stores, sinkTopics });
  }
  const repartitionTopics = new Map<string, { readsFrom: number; writtenBy: number }>();
  for (const [topic, writtenBy] of sinkOwner) {
    const reader = subOfTopic.get(topic);
    if (reader !== undefined) {
      // A repartition topic gets the partition count of the sub-topology that writes it.
      repartitionTopics.set(topic, { readsFrom: reader, writtenBy });
    }
  }
  for (const s of subtopologies) {
    for (const t of s.sinkTopics) {
      if (s.sources.has(t)) problems.push(`sub-topology ${s.id} writes ${t}, which it also reads (a cycle)`);
    }
  }
  const distinct = [...new Set(problems)]; // three readers of one topic: one line
  if (distinct.length === 1) throw new TopologyError(distinct[0]!);
  if (distinct.length > 1)
    throw new TopologyError(
      `the job's topology has ${distinct.length} problems:\n${distinct.map((m) => `  - ${m}`).join('\n')}`,
    );
  const warnings: string[] = [];
  for (const n of nodes) {
    if (!n.generatedName) continue;
    if (storesOfNode(n).length > 0)
      warnings.push(
        `operator ${n.name} has a generated name: its stores (${storesOfNode(n)
          .map((x) => x.name)
          .join(
            ', ',
          )}) and their changelogs are renamed, and their state lost, when an operator is added before it; give it { name }`,
      );
    else if (n.spec.kind === 'sink' && n.spec.internal && repartitionTopics.has(n.spec.topic))
      warnings.push(
        `repartition topic ${n.spec.topic} has a generated name: it is renamed (the old one orphaned) when an operator is added before its keyBy; give the keyBy { name }`,
      );
  }
  return {
    appId,
    subtopologies,
    repartitionTopics,
    warnings,
    stores: storeList,
    subtopologyOf: (t) => subOfTopic.get(t),
    fingerprint: layoutFingerprint(subtopologies),
    describe: () => describeTopology(appId, subtopologies),
  };
}

/** A short hash of each sub-topology's id and sorted source topics. */
function layoutFingerprint(subs: readonly SubTopology[]): string {
  return jsonHash(subs.map((s) => [s.id, [...s.sourceTopics].sort()]));
}

function describeTopology(appId: string, subs: readonly SubTopology[]): string {
  const lines = [`Topology of ${appId}:`];
  for (const s of subs) {
    lines.push(`  Sub-topology ${s.id} (reads ${s.sourceTopics.join(', ')})`);
    for (const n of s.nodes) {
      const extra =
        n.spec.kind === 'source'
          ? ` [${n.spec.topics.join(', ')}]`
          : n.spec.kind === 'sink' || (n.spec.kind === 'late' && n.spec.topic !== undefined)
            ? ` -> ${(n.spec as { topic: string }).topic}`
            : storesOfNode(n).length > 0
              ? ` stores: ${storesOfNode(n)
                  .map((x) => x.name)
                  .join(', ')}`
              : '';
      const to = n.children.length > 0 ? ` => ${n.children.map((c) => c.name).join(', ')}` : '';
      lines.push(`    ${n.name} (${n.spec.kind})${extra}${to}`);
    }
  }
  return lines.join('\n');
}
