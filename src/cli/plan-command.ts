import { loadConfig } from '../config/load.js';
import { KafkaClient } from '../kafka/client.js';
import { createLogger } from '../ops/logger.js';
import { secretsOf } from '../ops/redact.js';
import { deadLetterTopic, externalTopics, overflowTopic, topologyTopic } from '../runtime/topics.js';
import { listChanges, readRecordedTopology } from '../runtime/topology-record.js';
import { describeForRecord, diffTopologies, partitionsOf } from '../topology/descriptor.js';
import { parseArgs } from './args.js';
import { loadJob } from './load-job.js';
import { jobArg } from './run-command.js';
import { COMMAND_USAGE, UsageError } from './usage.js';

/**
 * `sluice plan <job>`: what deploying this version of the job would do to the deployed one's
 * state. Compares the job with the topology the last worker recorded (`<appId>-topology`), the
 * cluster's topics and the group's committed offsets. Exit 0: safe; 1: changes that orphan or
 * corrupt state (or names that will, see Topology.warnings); 2: used wrongly.
 */
export async function planCommand(argv: string[]): Promise<number> {
  let job: string;
  let args: ReturnType<typeof parseArgs>;
  try {
    args = parseArgs(argv);
    job = jobArg(args.positionals, 'plan');
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`sluice: ${e.message}\n\n${COMMAND_USAGE.plan}\n`);
    return 2;
  }
  const config = loadConfig({ file: args.configFile, flags: args.settings });
  const app = await loadJob(job);
  const topology = app.topology();
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const logger = createLogger({ level: 'warn', format: 'json', secrets: secretsOf(config) });
  const client = new KafkaClient({ ...config.kafka, clientId: `${config.kafka.clientId}-cli` }, logger);
  try {
    const admin = await client.admin();
    const { inputs, outputs } = externalTopics(topology);
    const counts = await admin.partitionCounts([...inputs, ...outputs]);
    const current = describeForRecord(topology, partitionsOf(topology, counts));
    const problems: string[] = [];
    for (const t of [...inputs, ...outputs].filter((x) => !counts.has(x)))
      problems.push(`topic ${t} does not exist on the cluster`);
    const recorded = await readRecordedTopology(client, admin, app.id);
    out(`Plan for ${app.id}:`);
    if (recorded) {
      out(`  recorded: ${recorded.writtenAt} (hash ${recorded.hash})`);
      out(`    stores: ${names(recorded.descriptor.subtopologies.flatMap((s) => s.stores))}`);
      out(`    repartitions: ${names(recorded.descriptor.repartitions.map((r) => ({ name: r.topic })))}`);
    } else out('  recorded: none (no worker of this app recorded its topology yet)');
    out(`  current stores: ${names(current.subtopologies.flatMap((s) => s.stores))}`);
    out(`  current repartitions: ${names(current.repartitions.map((r) => ({ name: r.topic })))}`);
    const diff = recorded
      ? diffTopologies(recorded.descriptor, current, topology.warnings)
      : diffTopologies(current, current, topology.warnings);
    problems.push(...diff.breaking.map((c) => c.message));
    const used = new Set([
      ...topology.repartitionTopics.keys(),
      ...topology.stores.map((s) => s.changelog),
      deadLetterTopic(app.id),
      overflowTopic(app.id),
      topologyTopic(app.id),
    ]);
    const orphans = (await admin.listTopics())
      .filter((t) => t.startsWith(`${app.id}-`) && /-(changelog|repartition)$/.test(t) && !used.has(t))
      .sort();
    out(`  orphaned internal topics: ${orphans.length > 0 ? orphans.join(', ') : 'none'}`);
    const sources = topology.subtopologies.flatMap((s) => s.sourceTopics);
    const present = sources.filter((t) => counts.has(t) || topology.repartitionTopics.has(t));
    const committed = (await admin.committedOffsets(app.id, present).catch(() => [])).filter(
      (o) => o.offset !== '-1',
    );
    out(
      `  committed offsets: ${committed.length > 0 ? `${committed.length} partitions of ${[...new Set(committed.map((o) => o.topic))].join(', ')}` : 'none'}`,
    );
    for (const s of diff.safe) out(`  change: ${s}`);
    if (problems.length === 0) {
      out('Safe: no change orphans or corrupts state.');
      return 0;
    }
    out(`Problems (${problems.length}):\n${listChanges(problems)}`);
    return 1;
  } finally {
    await client.close();
  }
}

function names(xs: ReadonlyArray<{ name: string }>): string {
  return xs.length > 0 ? xs.map((x) => x.name).join(', ') : 'none';
}
