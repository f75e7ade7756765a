/** The CLI's help texts: `sluice --help` and `sluice <command> --help`. */

export const SETTINGS_HELP = `Settings come from the YAML file (--config sluice.yaml or SLUICE_CONFIG), SLUICE_* env
variables and flags, in rising precedence: any setting as --<path> value (e.g.
--processing.guarantee at_least_once), and the short forms --brokers, --guarantee, --state-dir,
--http-port, --http-host, --log-level, --log-format. Every setting: docs/OPERATIONS.md.`;

export const USAGE = `sluice — stream processing on Kafka for TypeScript

Usage:
  sluice run <job-file> [--config sluice.yaml] [--<setting> value ...]   run one worker of a job
  sluice dev <job-file> [--kafka-port 9092] [...]
                                     like run; when no brokers are configured, starts a local Kafka
                                     and creates the job's missing input and output topics on it
  sluice topology <job-file> [--format text|json|dot]
                                     print the job's sub-topologies, topics and stores
  sluice plan <job-file> [--config sluice.yaml]
                                     compare the job with the deployed one: the changes that would
                                     orphan or corrupt its state (exit 1), else exit 0
  sluice reset <job-file> --yes      delete the app's offsets, internal topics and local state
  sluice topics create <topic>... [--partitions 4] [--compact] | list | delete <topic>... --yes
                                     create, list or delete topics on the configured cluster
  sluice produce <topic> [value ...] [--key-separator :]
                                     write records (the values given, else one per stdin line)
  sluice tail <topic> [--from-beginning] [--read-committed] [--max-records N] [--format text|json]
                                     print a topic's records as they come
  sluice group remove-member <job-file> --instance-id <id>
                                     remove a stopped static member from the group at once
                                     (scale-down: its tasks move now, not after the session timeout)
  sluice kafka start|stop|status [--version 4.4.0|3.9.1] [--port 9092]
  sluice --version                   print the version

Run sluice <command> --help for a command's options.
Settings come from the YAML file, SLUICE_* env variables and flags (in rising precedence),
e.g. --processing.guarantee at_least_once, --brokers 127.0.0.1:9092, --http-port 9464.
`;

export const COMMAND_USAGE: Record<string, string> = {
  group: `Usage:
  sluice group remove-member <job-file> --instance-id <id>[,<id>...] [--config sluice.yaml]
  sluice group remove-member --group <group-id> --instance-id <id>[,<id>...]

Removes static members (KIP-345) from the job's consumer group (the group id is the app id) at
once, by group.instance.id: the group rebalances now and their tasks move to the other workers,
instead of after kafka.sessionTimeoutMs. Use it after stopping a worker for good (scale-down);
a worker's id is in its log ("static group member"), its /status (worker.groupInstanceId) and
<state.dir>/<appId>/instance-id.
Prints each member removed; exits 1 when an id was not a member of the group.`,
  run: `Usage: sluice run <job-file> [--config sluice.yaml] [--<setting> value ...]

Runs one worker of the job (a .ts, .mts, .js or .mjs file whose default export is an App) until
SIGTERM or SIGINT (a graceful stop: last checkpoint). Start more processes of the same job to share
its partitions, or run several workers in this one with --processing.threads N (Kafka Streams'
num.stream.threads: one per core). Its input and output topics must exist. A worker is a static group member
(kafka.staticMembership): a stopped one keeps its place for kafka.sessionTimeoutMs, so a restart
gets its tasks back without a rebalance.
  --leave-group-on-stop   leave the group on SIGTERM/SIGINT, so the tasks move at once (scale-down)
  --allow-state-change    start although the job changed in a way that orphans or corrupts state
                          (see sluice plan); the changes are logged and recorded

${SETTINGS_HELP}`,
  dev: `Usage: sluice dev <job-file> [--kafka-port 9092] [--config sluice.yaml] [--<setting> value ...]

Like run. When no brokers are configured (no --brokers, SLUICE_KAFKA_BROKERS, KAFKA_BROKERS or
kafka.brokers in the config file), starts or reuses a local Kafka on --kafka-port and creates the
job's missing input and output topics there (warning when a name is close to an existing topic).
Prints the status page's address once the worker listens.

${SETTINGS_HELP}`,
  topology: `Usage: sluice topology <job-file> [--format text|json|dot]

Prints the job's sub-topologies, repartition topics and stores, without connecting to Kafka.
  --format text   (default) the readable description
  --format json   one JSON document: sub-topologies with their operators, topics and stores
  --format dot    a Graphviz graph: sluice topology job.ts --format dot | dot -Tsvg > topology.svg`,
  plan: `Usage: sluice plan <job-file> [--config sluice.yaml] [--brokers ...]

Compares the job with what is deployed: the topology the last worker recorded in the compacted
topic <appId>-topology (stores, their key and value serdes, partition counts, repartition topics),
the internal topics on the cluster and the group's committed offsets. Prints the recorded and the
current stores, the internal topics the job no longer uses (orphans), whether the group has
committed offsets, and every change that would orphan or corrupt state: a store gone or renamed,
a store's key or value serde changed, a source's partition count changed, a repartition topic
gone, and stateful operators or repartitions with generated names (give them { name }).
Exits 0 when safe, 1 when there are problems, 2 when used wrongly. A worker refuses to start on
such changes unless started with --allow-state-change (processing.allowStateChange).`,
  reset: `Usage: sluice reset <job-file> --yes [--config sluice.yaml] [--brokers ...]

Deletes the app's committed offsets, its internal topics (repartition, changelogs) and this
machine's local state, so the job starts over from its inputs. Output and dead-letter topics are
kept. Without --yes it prints what it would delete. Stop every worker first.`,
  produce: `Usage: sluice produce <topic> [value ...] [--key-separator SEP] [--config sluice.yaml] [--brokers ...]

Writes one record per value given, or else one per line of stdin (empty lines skipped), as UTF-8.
  --key-separator SEP   split each value at the first SEP into key and value (a value without
                        SEP gets no key); without it records have no key
The topic must exist. Prints how many records were written to stderr.
  printf 'u1:hello\\nu2:world\\n' | sluice produce greetings --key-separator :`,
  tail: `Usage: sluice tail <topic> [--from-beginning] [--read-committed] [--max-records N] [--format text|json]

Prints the topic's records as they come, one line each: partition, offset, key and value
(tab-separated; keys and values as UTF-8, a null one as "null"). Reads in a group of its own that
commits nothing. Stops on Ctrl-C, or after N records with --max-records. Skips the watermark
control records of repartition topics (no value, header sluice.watermark).
  --from-beginning   start at each partition's first record (default: records written from now on)
  --read-committed   only records of committed transactions (what a Sluice job's readers see);
                     default read_uncommitted, which also shows aborted writes
  --format json      one JSON object per line: {"partition","offset","timestamp","key","value"}`,
};

/**
 * A command used wrongly: main prints the message and (when `command` is given) the command's
 * usage, no stack trace.
 */
export class UsageError extends Error {
  readonly command: string | undefined;
  constructor(message: string, command?: string) {
    super(message);
    this.name = 'UsageError';
    this.command = command;
  }
}
