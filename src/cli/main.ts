import { ConfigError, SluiceError } from '../errors.js';
import { scrubSecrets } from '../ops/redact.js';
import { groupCommand } from './group-command.js';
import { kafkaCommand } from './kafka-command.js';
import { resetCommand } from './reset-command.js';
import { devCommand, runCommand, topologyCommand } from './run-command.js';
import { topicsCommand } from './topics-command.js';

const USAGE = `sluice — stream processing on Kafka for TypeScript

Usage:
  sluice run <job-file> [--config sluice.yaml] [--<setting> value ...]   run one worker of a job
  sluice dev <job-file> [--kafka-port 9092] [...]
                                     like run; when no brokers are configured, starts a local Kafka
                                     and creates the job's missing input and output topics on it
  sluice topology <job-file>         print the job's sub-topologies, topics and stores
  sluice reset <job-file> --yes      delete the app's offsets, internal topics and local state
  sluice topics create <topic>... [--partitions 4] [--compact] | list
                                     create or list topics on the configured cluster
  sluice group remove-member <job-file> --instance-id <id>
                                     remove a stopped static member from the group at once
                                     (scale-down: its tasks move now, not after the session timeout)
  sluice kafka start|stop|status [--version 4.4.0|3.9.1] [--port 9092]

Settings come from the YAML file, SLUICE_* env variables and flags (in rising precedence),
e.g. --processing.guarantee at_least_once, --brokers 127.0.0.1:9092, --http-port 9464.
run and dev take --leave-group-on-stop (kafka.leaveGroupOnClose): on SIGTERM/SIGINT the worker
leaves the group, so its tasks move at once (scale-down); without it a static member keeps its
place for a restart.
`;

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  try {
    switch (cmd) {
      case 'run':
        return await runCommand(rest);
      case 'dev':
        return await devCommand(rest);
      case 'topology':
        return await topologyCommand(rest);
      case 'reset':
        return await resetCommand(rest);
      case 'topics':
        return await topicsCommand(rest);
      case 'kafka':
        return await kafkaCommand(rest);
      case 'group':
        return await groupCommand(rest);
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(USAGE);
        return cmd === undefined ? 1 : 0;
      default:
        process.stderr.write(`unknown command ${JSON.stringify(cmd)}\n\n${USAGE}`);
        return 1;
    }
  } catch (e) {
    // Written outside the logger: scrub the secrets it knows of here too.
    if (e instanceof ConfigError || e instanceof SluiceError) {
      process.stderr.write(scrubSecrets(`sluice: ${e.message}\n`));
      return 1;
    }
    process.stderr.write(scrubSecrets(`sluice: ${(e as Error)?.stack ?? String(e)}\n`));
    return 1;
  }
}
