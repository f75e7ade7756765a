import { loadConfig } from '../config/load.js';
import type { SluiceConfig } from '../config/schema.js';
import { ConfigError } from '../errors.js';
import type { KafkaAdmin } from '../kafka/admin.js';
import { KafkaClient } from '../kafka/client.js';
import { createLogger } from '../ops/logger.js';
import { secretsOf } from '../ops/redact.js';
import { closeToExisting, didYouMean, typoWarning } from '../suggest.js';
import { parseArgs } from './args.js';
import { UsageError } from './usage.js';

export const TOPICS_USAGE = `Usage:
  sluice topics create <topic> [<topic> ...] [--partitions N] [--compact]
  sluice topics list
  sluice topics delete <topic> [<topic> ...] --yes

create: creates the topics that do not exist yet (N partitions, default 4; --compact for a
        compacted topic) and prints the partition count of each. Replication is the broker's
        default. Warns when a name is close to an existing topic's (a typo?).
list:   prints every topic that is not internal to Kafka, with its partition count.
delete: deletes the topics and their records; without --yes prints what it would delete.
        Kafka's own topics (__*) are refused; a topic that does not exist is named, not an error.
The cluster is the job's: --brokers, SLUICE_KAFKA_BROKERS or KAFKA_BROKERS, --config sluice.yaml
(with its security settings).`;

/** Default partition count of `topics create`: enough for a few workers to share. */
const DEFAULT_PARTITIONS = 4;

/**
 * `sluice topics create|list`: the jobs' input and output topics are the user's to create (the
 * worker creates only its internal topics), so the CLI has a way to make them on the same
 * cluster, with the same connection settings as the worker.
 */
export async function topicsCommand(argv: string[]): Promise<number> {
  const args = parseArgs(argv, ['compact', 'help', 'yes'], ['partitions']);
  const [action, ...topics] = args.positionals;
  if (args.switches.has('help')) {
    process.stdout.write(`${TOPICS_USAGE}\n`);
    return 0;
  }
  const ok =
    ((action === 'create' || action === 'delete') && topics.length > 0) ||
    (action === 'list' && topics.length === 0);
  if (!ok) {
    throw new UsageError(
      action === undefined || !['create', 'list', 'delete'].includes(action)
        ? `topics needs an action: create, list or delete${action === undefined ? '' : `, not ${JSON.stringify(action)}${didYouMean(action, ['create', 'list', 'delete'])}`}`
        : action === 'list'
          ? 'topics list takes no topic names'
          : `topics ${action} needs at least one topic name`,
      'topics',
    );
  }
  if (action === 'delete') {
    const internal = topics.filter((t) => t.startsWith('__'));
    if (internal.length > 0)
      throw new UsageError(`refusing to delete Kafka's own topics: ${internal.join(', ')}`, 'topics');
    const config = loadConfig({ file: args.configFile, flags: args.settings });
    return withAdmin(config, async (admin) => {
      const existing = await admin.listTopics();
      const present = topics.filter((t) => existing.includes(t));
      for (const t of topics.filter((t) => !existing.includes(t)))
        process.stderr.write(`${t}: no such topic${didYouMean(t, existing)}\n`);
      if (args.switches.get('yes') !== 'true') {
        if (present.length > 0)
          process.stdout.write(
            `sluice topics delete would delete ${present.join(', ')} and all their records.\nRun again with --yes to do it.\n`,
          );
        return 2;
      }
      await admin.deleteTopics(present);
      for (const t of present) process.stdout.write(`${t}: deleted\n`);
      return present.length === topics.length ? 0 : 1;
    });
  }
  const partitions = Number(args.switches.get('partitions') ?? DEFAULT_PARTITIONS);
  if (!Number.isInteger(partitions) || partitions < 1) {
    throw new ConfigError(
      [
        {
          path: 'flag --partitions',
          message: `expected a whole number ≥ 1, got ${args.switches.get('partitions')}`,
        },
      ],
      'command line',
    );
  }
  const config = loadConfig({ file: args.configFile, flags: args.settings });
  return withAdmin(config, async (admin) => {
    if (action === 'create') {
      const config = args.switches.has('compact') ? { 'cleanup.policy': 'compact' } : undefined;
      for (const p of closeToExisting(topics, await admin.listTopics()))
        process.stderr.write(`${typoWarning(p)}\n`);
      const created = new Set(
        await admin.ensureTopics(
          topics.map((topic) => ({ topic, partitions, ...(config ? { config } : {}) })),
        ),
      );
      const counts = await admin.partitionCounts(topics);
      for (const t of topics)
        process.stdout.write(`${t}: ${created.has(t) ? 'created' : 'exists'}, ${counts.get(t)} partitions\n`);
      return 0;
    }
    const all = (await admin.listTopics()).filter((t) => !t.startsWith('__')).sort();
    const counts = await admin.partitionCounts(all);
    for (const t of all) process.stdout.write(`${t}\t${counts.get(t)}\n`);
    return 0;
  });
}

/** Runs `fn` with an admin client on the configured cluster, and closes it afterwards. */
export async function withAdmin<T>(
  config: Readonly<SluiceConfig>,
  fn: (admin: KafkaAdmin) => Promise<T>,
): Promise<T> {
  const logger = createLogger({ level: 'warn', format: 'json', secrets: secretsOf(config) });
  const client = new KafkaClient({ ...config.kafka, clientId: `${config.kafka.clientId}-cli` }, logger);
  try {
    return await fn(await client.admin());
  } finally {
    await client.close();
  }
}
