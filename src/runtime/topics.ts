import { TopologyError } from '../errors.js';
import type { KafkaAdmin } from '../kafka/admin.js';
import type { TopicSpec } from '../kafka/types.js';
import { didYouMean } from '../suggest.js';
import type { Topology } from '../topology/build.js';

export function deadLetterTopic(appId: string): string {
  return `${appId}-dlq`;
}

/** Where workers record the topology they run (see topology-record.ts): compacted, 1 partition. */
export function topologyTopic(appId: string): string {
  return `${appId}-topology`;
}

/**
 * Configuration of a repartition topic Sluice creates, as Kafka Streams': no time retention (the
 * purge deletes what was read), and segments small and short enough that the broker can delete
 * what the purge released (it deletes whole closed segments only).
 */
export const REPARTITION_CONFIG: Readonly<Record<string, string>> = {
  'cleanup.policy': 'delete',
  'retention.ms': '-1',
  'segment.bytes': String(50 * 1024 * 1024),
  'segment.ms': '600000',
};

/**
 * Configuration of the dead-letter and overflow topics: the broker stamps their records with the
 * time they were written, so that their retention counts from the failure or the shedding. With
 * the record's own time (event time, perhaps years old in a backfill), a time retention deleted
 * them at the broker's next check. The record's own timestamp is in `sluice.source.timestamp`.
 */
export const KEPT_RECORDS_CONFIG: Readonly<Record<string, string>> = {
  'message.timestamp.type': 'LogAppendTime',
};

/** Where `overload.mode: divert` writes the records it sheds. */
export function overflowTopic(appId: string): string {
  return `${appId}-overflow`;
}

/**
 * The topics a job reads and writes that it does not own: every source and sink that is not one
 * of its repartition topics. They must exist before a worker starts.
 */
export function externalTopics(topology: Topology): { inputs: string[]; outputs: string[] } {
  const repartition = topology.repartitionTopics;
  const inputs = new Set<string>();
  const outputs = new Set<string>();
  for (const s of topology.subtopologies) {
    for (const t of s.sourceTopics) if (!repartition.has(t)) inputs.add(t);
    for (const t of s.sinkTopics) if (!repartition.has(t)) outputs.add(t);
  }
  return { inputs: [...inputs], outputs: [...outputs] };
}

/** Partition count per sub-topology, once its topics exist. */
export type PartitionPlan = Map<number, number>;

/**
 * Checks the topology against the cluster and creates the internal topics: every external input
 * and output must exist, inputs of one sub-topology must be co-partitioned, repartition topics
 * get their writer's partition count, changelogs their task count (compacted). Internal topics
 * get `replicationFactor` copies (`kafka.replicationFactor`), by default min(3, live brokers).
 */
export async function prepareTopics(
  admin: KafkaAdmin,
  topology: Topology,
  opts: { overflow?: boolean; replicationFactor?: number | undefined } = {},
): Promise<PartitionPlan> {
  const repartition = topology.repartitionTopics;
  const { inputs, outputs } = externalTopics(topology);
  const counts = await admin.partitionCounts([...inputs, ...outputs]);
  const missing = [...inputs, ...outputs].filter((t) => !counts.has(t));
  if (missing.length > 0) {
    const existing = await admin.listTopics();
    const named = missing.map((t) => `${t}${didYouMean(t, existing)}`);
    throw new TopologyError(
      `topics missing on the cluster: ${named.join(', ')}. Create them (npx sluice topics create ${missing.join(' ')} --partitions 4) or fix the job.`,
    );
  }
  const plan: PartitionPlan = new Map();
  // Sub-topologies in order: a repartition topic's writer always comes before its reader.
  const pending = [...topology.subtopologies];
  const internalSpecs: TopicSpec[] = [];
  for (let guard = 0; pending.length > 0 && guard < 1000; guard++) {
    const s = pending.shift()!;
    const sizes = new Map<string, number>();
    let unresolved = false;
    for (const t of s.sourceTopics) {
      const r = repartition.get(t);
      if (r) {
        const n = plan.get(r.writtenBy);
        if (n === undefined) unresolved = true;
        else sizes.set(t, n);
      } else sizes.set(t, counts.get(t)!);
    }
    if (unresolved) {
      pending.push(s);
      continue;
    }
    const distinct = new Set(sizes.values());
    if (distinct.size > 1) {
      throw new TopologyError(
        `inputs of sub-topology ${s.id} must be co-partitioned (same partition count) but are not: ${[...sizes].map(([t, n]) => `${t}=${n}`).join(', ')}`,
        'SLUICE_NOT_COPARTITIONED',
      );
    }
    const n = [...distinct][0]!;
    plan.set(s.id, n);
    // No time retention (as Kafka Streams'): records carry event time, and a broker's time retention
    // would delete a backfill's records (older than it) before the reader got to them. What the app
    // has committed past is deleted instead (repartition-purge.ts).
    for (const t of s.sourceTopics)
      if (repartition.has(t)) internalSpecs.push({ topic: t, partitions: n, config: REPARTITION_CONFIG });
    for (const st of topology.stores.filter((x) => x.subtopology === s.id)) {
      internalSpecs.push({
        topic: st.changelog,
        partitions: n,
        // CreateTime: the checkpoint's fingerprint names the last record by the timestamp the
        // task gave it (a broker default of LogAppendTime would make every open rebuild).
        config: {
          'cleanup.policy': 'compact',
          'min.compaction.lag.ms': '0',
          'message.timestamp.type': 'CreateTime',
        },
      });
    }
  }
  const existing = await admin.partitionCounts(internalSpecs.map((s) => s.topic));
  for (const spec of internalSpecs) {
    const have = existing.get(spec.topic);
    if (have !== undefined && have !== spec.partitions) {
      throw new TopologyError(
        `internal topic ${spec.topic} has ${have} partitions but needs ${spec.partitions}; run \`sluice reset\` for this app`,
        'SLUICE_NOT_COPARTITIONED',
      );
    }
  }
  const maxPartitions = Math.max(1, ...plan.values());
  const specs: TopicSpec[] = [
    ...internalSpecs,
    {
      topic: deadLetterTopic(topology.appId),
      partitions: Math.min(maxPartitions, 8),
      config: KEPT_RECORDS_CONFIG,
    },
    { topic: topologyTopic(topology.appId), partitions: 1, config: { 'cleanup.policy': 'compact' } },
    ...(opts.overflow
      ? [{ topic: overflowTopic(topology.appId), partitions: maxPartitions, config: KEPT_RECORDS_CONFIG }]
      : []),
  ];
  const existingNames = new Set(await admin.listTopics());
  if (specs.some((s) => !existingNames.has(s.topic))) {
    const replicationFactor = opts.replicationFactor ?? Math.max(1, Math.min(3, await admin.brokerCount()));
    await admin.ensureTopics(specs.map((s) => ({ ...s, replicationFactor })));
  }
  return plan;
}

/**
 * Reads the `max.message.bytes` of every topic the job's tasks write records to (its sinks,
 * repartition topics included, the dead-letter and overflow topics, the changelogs) into `into`:
 * a task's collector then refuses a larger output where the record that made it is processed, so
 * the record is dead-lettered (a dead letter too large goes without its value) instead of every
 * checkpoint failing on it; a changelog record too large fails the worker, naming the store
 * (`changelogBound`). Without them (a cluster that refuses DescribeConfigs to this
 * principal), nothing is checked and the broker's refusal resets the task, as before.
 */
export async function learnRecordLimits(
  admin: KafkaAdmin,
  topology: Topology,
  into: Map<string, number>,
  onError: (e: unknown) => void,
): Promise<void> {
  const topics = new Set([deadLetterTopic(topology.appId), overflowTopic(topology.appId)]);
  for (const s of topology.subtopologies) for (const t of s.sinkTopics) topics.add(t);
  for (const store of topology.stores) topics.add(store.changelog);
  try {
    for (const [t, n] of await admin.maxMessageBytes([...topics])) into.set(t, n);
  } catch {
    // One topic refused (its ACLs) fails the whole request: each alone, so the others count.
    for (const topic of topics)
      try {
        for (const [t, n] of await admin.maxMessageBytes([topic])) into.set(t, n);
      } catch (e) {
        onError(e);
      }
  }
}
