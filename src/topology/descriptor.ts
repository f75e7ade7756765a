import { createHash } from 'node:crypto';
import type { Serde } from '../api/serdes.js';
import type { StateDescriptor } from '../api/state.js';
import type { Topology } from './build.js';
import { jsonHash } from './json-hash.js';
import { storesOfNode } from './nodes.js';

/**
 * What a deployed job's state hangs on, in a form that can be recorded (JSON) and compared with
 * the next version of the job: per sub-topology its source topics with their partition counts,
 * its stores with their serdes, the repartition topics and sinks. `sluice plan` and a starting
 * worker diff the recorded one with their own ({@link diffTopologies}).
 */
export interface TopologyDescriptor {
  readonly version: 1;
  readonly appId: string;
  readonly subtopologies: ReadonlyArray<{
    readonly id: number;
    /** Source topic → partition count (absent when not known, e.g. the topic is missing). */
    readonly sources: Readonly<Record<string, number | null>>;
    readonly stores: readonly StoreDescriptor[];
    readonly sinks: readonly string[];
  }>;
  readonly repartitions: ReadonlyArray<{ topic: string; writtenBy: number; readsFrom: number }>;
}

export interface StoreDescriptor {
  readonly name: string;
  readonly changelog: string;
  readonly kind: string;
  /** Fingerprint of the key serde (the keys of the records the operator sees). */
  readonly key: string;
  readonly value: string;
}

/**
 * A serde's identity: its `fingerprint`, else `custom:<name>:<hash of its code>`. The fallback
 * cannot see a change that keeps the code (a closure over another setting), and sees a changed
 * format in a rewrite that writes the same bytes; give a custom serde a `fingerprint` to decide.
 */
export function serdeFingerprint(serde: Serde<unknown> | undefined): string {
  if (serde === undefined) return 'none';
  if (typeof serde.fingerprint === 'string') return serde.fingerprint;
  const code = `${String(serde.serialize)}\n${String(serde.deserialize)}`;
  return `custom:${serde.name}:${createHash('sha256').update(code).digest('hex').slice(0, 12)}`;
}

/**
 * Partition count per sub-topology from the counts of the external topics: a repartition topic
 * gets its writer's. Undefined for a sub-topology whose inputs are missing.
 */
export function partitionsOf(topology: Topology, counts: ReadonlyMap<string, number>): Map<number, number> {
  const plan = new Map<number, number>();
  for (let pass = 0; pass < topology.subtopologies.length; pass++) {
    for (const s of topology.subtopologies) {
      if (plan.has(s.id)) continue;
      const sizes = s.sourceTopics.map((t) => {
        const r = topology.repartitionTopics.get(t);
        return r ? plan.get(r.writtenBy) : counts.get(t);
      });
      if (sizes.every((n) => n !== undefined)) plan.set(s.id, Math.max(...sizes));
    }
  }
  return plan;
}

/**
 * What a store's values are: the serde of a value state; `entries:<key>:<value>` for map state and
 * `elements:<serde>` for list state, stored one entry per map key or element (older versions
 * stored one blob per record key, under the bare serde's fingerprint: a layout change).
 */
function storeValueFingerprint(d: StateDescriptor): string {
  if (d.kind === 'map') return `entries:${serdeFingerprint(d.keySerde)}:${serdeFingerprint(d.serde)}`;
  if (d.kind === 'list') return `elements:${serdeFingerprint(d.serde)}`;
  return serdeFingerprint(d.serde);
}

/** The descriptor of a topology, with the partition count of each sub-topology (its plan). */
export function describeForRecord(topology: Topology, plan: ReadonlyMap<number, number>): TopologyDescriptor {
  return {
    version: 1,
    appId: topology.appId,
    subtopologies: topology.subtopologies.map((s) => {
      const procs = s.nodes.filter((n) => storesOfNode(n).length > 0);
      return {
        id: s.id,
        sources: Object.fromEntries(s.sourceTopics.map((t) => [t, plan.get(s.id) ?? null])),
        stores: procs.flatMap((n) =>
          storesOfNode(n).map((st) => ({
            name: st.name,
            changelog: topology.stores.find((x) => x.name === st.name)!.changelog,
            kind: st.descriptor.kind,
            key: serdeFingerprint(n.parents[0]?.keySerde),
            value: storeValueFingerprint(st.descriptor),
          })),
        ),
        sinks: s.sinkTopics.filter((t) => !topology.repartitionTopics.has(t)),
      };
    }),
    repartitions: [...topology.repartitionTopics].map(([topic, r]) => ({
      topic,
      writtenBy: r.writtenBy,
      readsFrom: r.readsFrom,
    })),
  };
}

/** A stable hash of a descriptor (its JSON), to tell whether anything changed. */
export function descriptorHash(d: TopologyDescriptor): string {
  return jsonHash(d);
}

export type ChangeKind =
  | 'store-removed'
  | 'store-key-serde'
  | 'store-value-serde'
  | 'partitions'
  | 'repartition-removed'
  | 'generated-name';

/** A change that would orphan or corrupt state. */
export interface StateChange {
  readonly kind: ChangeKind;
  readonly message: string;
}

export interface TopologyDiff {
  /** Changes that orphan or corrupt state: a worker refuses them without allowStateChange. */
  readonly breaking: StateChange[];
  /** Changes that lose nothing (a new store, sink or source): recorded and logged. */
  readonly safe: string[];
}

type Store = StoreDescriptor & { sub: number };

function storesOf(d: TopologyDescriptor): Map<string, Store> {
  return new Map(d.subtopologies.flatMap((s) => s.stores.map((st) => [st.name, { ...st, sub: s.id }])));
}

function sourcesOf(d: TopologyDescriptor): Map<string, number | null> {
  return new Map(d.subtopologies.flatMap((s) => Object.entries(s.sources)));
}

/**
 * What changes from the recorded descriptor to the current one. `warnings` (Topology.warnings:
 * stateful operators and repartitions with generated names) are breaking too when given: `sluice
 * plan` passes them, a worker does not (they only risk a later change).
 */
export function diffTopologies(
  recorded: TopologyDescriptor,
  current: TopologyDescriptor,
  warnings: readonly string[] = [],
): TopologyDiff {
  const breaking: StateChange[] = [];
  const safe: string[] = [];
  const before = storesOf(recorded);
  const after = storesOf(current);
  const added = [...after.values()].filter((s) => !before.has(s.name));
  for (const old of before.values()) {
    const now = after.get(old.name);
    if (!now) {
      const like = added.filter((s) => s.kind === old.kind && s.sub === old.sub);
      const guess = like.length > 0 ? ` (renamed to ${like.map((s) => s.name).join(' or ')}?)` : '';
      breaking.push({
        kind: 'store-removed',
        message: `store ${old.name} is gone${guess}: its state in ${old.changelog} is orphaned`,
      });
      continue;
    }
    if (now.key !== old.key)
      breaking.push({
        kind: 'store-key-serde',
        message: `store ${old.name}: key serde changed from ${old.key} to ${now.key}: the stored keys no longer match the records'`,
      });
    if (now.value !== old.value)
      breaking.push({
        kind: 'store-value-serde',
        message: `store ${old.name}: value serde changed from ${old.value} to ${now.value}: the stored values cannot be read`,
      });
  }
  for (const s of added) safe.push(`new store ${s.name} (${s.kind})`);
  const srcBefore = sourcesOf(recorded);
  const srcAfter = sourcesOf(current);
  for (const [topic, n] of srcAfter) {
    if (!srcBefore.has(topic)) safe.push(`new source ${topic}`);
    else {
      const was = srcBefore.get(topic);
      if (was != null && n != null && was !== n)
        breaking.push({
          kind: 'partitions',
          message: `source ${topic}: ${was} partitions recorded, ${n} now: keys move to other partitions, away from their state`,
        });
    }
  }
  const repNow = new Set(current.repartitions.map((r) => r.topic));
  for (const r of recorded.repartitions)
    if (!repNow.has(r.topic))
      breaking.push({
        kind: 'repartition-removed',
        message: `repartition topic ${r.topic} is no longer used: records in it not yet processed are lost`,
      });
  const sinksBefore = new Set(recorded.subtopologies.flatMap((s) => s.sinks));
  for (const t of new Set(current.subtopologies.flatMap((s) => s.sinks)))
    if (!sinksBefore.has(t)) safe.push(`new sink ${t}`);
  for (const w of warnings) breaking.push({ kind: 'generated-name', message: w });
  return { breaking, safe };
}
