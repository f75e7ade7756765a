import type { Topology } from '../topology/build.js';
import { type GraphNode, storesOfNode } from '../topology/nodes.js';

/** `sluice topology --format json`: the sub-topologies, their operators, topics and stores. */
export function topologyJson(t: Topology): object {
  return {
    appId: t.appId,
    subtopologies: t.subtopologies.map((s) => ({
      id: s.id,
      sourceTopics: [...s.sourceTopics],
      sinkTopics: [...s.sinkTopics],
      nodes: s.nodes.map((n) => ({
        name: n.name,
        kind: n.spec.kind,
        ...topicsOf(n),
        children: n.children.map((c) => c.name),
      })),
      stores: s.stores.map((x) => x.name),
    })),
    repartitionTopics: [...t.repartitionTopics].map(([topic, r]) => ({ topic, ...r })),
    stores: t.stores.map((x) => ({ name: x.name, changelog: x.changelog, subtopology: x.subtopology })),
  };
}

function topicsOf(n: GraphNode): { topics?: string[]; topic?: string } {
  const s = n.spec;
  if (s.kind === 'source') return { topics: [...s.topics] };
  if (s.kind === 'sink') return { topic: s.topic };
  if (s.kind === 'late' && s.topic !== undefined) return { topic: s.topic };
  return {};
}

/**
 * `sluice topology --format dot`: a Graphviz graph (`| dot -Tsvg > topology.svg`), one cluster
 * per sub-topology, topics as ellipses between them, operators as boxes, stores as cylinders.
 */
export function topologyDot(t: Topology): string {
  const q = (s: string) => JSON.stringify(s);
  const lines = [`digraph ${q(t.appId)} {`, '  rankdir=LR;', '  node [shape=box, fontname="Helvetica"];'];
  const topics = new Set<string>();
  const edges: string[] = [];
  for (const s of t.subtopologies) {
    lines.push(`  subgraph ${q(`cluster_${s.id}`)} {`, `    label=${q(`sub-topology ${s.id}`)};`);
    for (const n of s.nodes) {
      lines.push(`    ${q(n.name)} [label=${q(`${n.name}\n(${n.spec.kind})`)}];`);
      for (const c of n.children) edges.push(`  ${q(n.name)} -> ${q(c.name)};`);
      const where = topicsOf(n);
      for (const topic of where.topics ?? []) {
        topics.add(topic);
        edges.push(`  ${q(`topic:${topic}`)} -> ${q(n.name)};`);
      }
      if (where.topic !== undefined) {
        topics.add(where.topic);
        edges.push(`  ${q(n.name)} -> ${q(`topic:${where.topic}`)};`);
      }
    }
    for (const st of s.stores) {
      lines.push(`    ${q(`store:${st.name}`)} [shape=cylinder, label=${q(st.name)}];`);
      const owner = s.nodes.find((n) => st.name.startsWith(`${n.name}-`) && storesOfNode(n).length > 0);
      if (owner) edges.push(`  ${q(owner.name)} -> ${q(`store:${st.name}`)} [dir=both, style=dashed];`);
    }
    lines.push('  }');
  }
  for (const topic of topics) {
    const internal = t.repartitionTopics.has(topic);
    lines.push(
      `  ${q(`topic:${topic}`)} [shape=ellipse, label=${q(topic)}${internal ? ', style=dashed' : ''}];`,
    );
  }
  lines.push(...edges, '}');
  return `${lines.join('\n')}\n`;
}
