import type { SluiceConfig } from '../config/schema.js';
import { SluiceError } from '../errors.js';
import type { KafkaAdmin } from '../kafka/admin.js';
import type { KafkaClient } from '../kafka/client.js';
import type { Logger } from '../ops/logger.js';
import type { Topology } from '../topology/build.js';
import {
  describeForRecord,
  descriptorHash,
  diffTopologies,
  type TopologyDescriptor,
} from '../topology/descriptor.js';
import { learnRecordLimits, type PartitionPlan, prepareTopics, topologyTopic } from './topics.js';

/** One record of `<appId>-topology`: the descriptor the last worker to change it ran. */
export interface TopologyRecord {
  readonly descriptor: TopologyDescriptor;
  readonly hash: string;
  /** ISO time of the write. */
  readonly writtenAt: string;
}

/** The last record of `<appId>-topology` keyed by the app id; undefined when none (or no topic). */
export async function readRecordedTopology(
  client: KafkaClient,
  admin: KafkaAdmin,
  appId: string,
): Promise<TopologyRecord | undefined> {
  const topic = topologyTopic(appId);
  if (!(await admin.listTopics()).includes(topic)) return undefined;
  const reader = client.partitionReader();
  try {
    const { low, high } = await reader.endOffsets(topic, 0);
    if (high <= low) return undefined;
    let last: TopologyRecord | undefined;
    // The last few offsets: the newest record of this app is among them (one writer per app id).
    const from = high - 16n > low ? high - 16n : low;
    await reader.read({
      topic,
      partition: 0,
      from,
      to: high,
      stallTimeoutMs: 10_000,
      onRecords: (records) => {
        for (const r of records) {
          if (r.key?.toString('utf8') !== appId || r.value === null) continue;
          try {
            const v = JSON.parse(r.value.toString('utf8')) as TopologyRecord;
            if (v?.descriptor?.version === 1) last = v;
          } catch {
            // Not ours: ignore it.
          }
        }
      },
    });
    return last;
  } finally {
    await reader.close();
  }
}

/** The changes listed for a person: one per line. */
export function listChanges(messages: readonly string[]): string {
  return messages.map((m) => `  - ${m}`).join('\n');
}

/**
 * Prepares the topics, then compares the topology with the one recorded in `<appId>-topology`:
 * a change that orphans or corrupts state fails the start with SLUICE_STATE_CHANGE, unless
 * `processing.allowStateChange`. The new descriptor is recorded when it differs.
 */
export async function prepareAndRecord(
  admin: KafkaAdmin,
  client: KafkaClient,
  topology: Topology,
  config: Readonly<SluiceConfig>,
  logger: Logger,
): Promise<PartitionPlan> {
  const plan = await prepareTopics(admin, topology, {
    overflow: config.overload.mode === 'divert',
    replicationFactor: config.kafka.replicationFactor,
  });
  await learnRecordLimits(admin, topology, client.recordLimits, (err) =>
    logger.warn(
      { err },
      "cannot read the output topics' max.message.bytes: outputs too large are not dead-lettered",
    ),
  );
  const descriptor = describeForRecord(topology, plan);
  const hash = descriptorHash(descriptor);
  const recorded = await readRecordedTopology(client, admin, topology.appId);
  if (recorded?.hash === hash) return plan;
  if (recorded) {
    const diff = diffTopologies(recorded.descriptor, descriptor);
    const msgs = diff.breaking.map((c) => c.message);
    if (msgs.length > 0 && !config.processing.allowStateChange)
      throw new SluiceError(
        'SLUICE_STATE_CHANGE',
        `SLUICE_STATE_CHANGE: the job changed since ${recorded.writtenAt} in ways that orphan or corrupt its state:\n${listChanges(msgs)}\n` +
          'Run `sluice plan` for the details; start with --allow-state-change to accept them, or `sluice reset` to start over.',
      );
    for (const m of msgs) logger.warn({ change: m }, 'state change allowed (processing.allowStateChange)');
    for (const m of diff.safe) logger.info({ change: m }, 'topology change');
  }
  const record: TopologyRecord = { descriptor, hash, writtenAt: new Date().toISOString() };
  const producer = await client.plainProducer();
  try {
    const value = Buffer.from(JSON.stringify(record), 'utf8');
    const key = Buffer.from(topology.appId, 'utf8');
    await producer.send(new Map([[topologyTopic(topology.appId), [{ key, value, partition: 0 }]]]));
  } finally {
    await producer.close().catch(() => undefined);
  }
  logger.info({ hash }, 'topology recorded');
  return plan;
}
