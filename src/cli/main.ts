import { readFileSync } from 'node:fs';
import { ConfigError, SluiceError } from '../errors.js';
import { scrubSecrets } from '../ops/redact.js';
import { didYouMean } from '../suggest.js';
import { groupCommand } from './group-command.js';
import { kafkaCommand } from './kafka-command.js';
import { planCommand } from './plan-command.js';
import { produceCommand, tailCommand } from './records-command.js';
import { resetCommand } from './reset-command.js';
import { devCommand, runCommand, topologyCommand } from './run-command.js';
import { TOPICS_USAGE, topicsCommand } from './topics-command.js';
import { COMMAND_USAGE, USAGE, UsageError } from './usage.js';

const COMMANDS: Record<string, (argv: string[]) => Promise<number>> = {
  run: runCommand,
  dev: devCommand,
  topology: topologyCommand,
  plan: planCommand,
  reset: resetCommand,
  topics: topicsCommand,
  produce: produceCommand,
  tail: tailCommand,
  kafka: kafkaCommand,
  group: groupCommand,
};

/** Commands that run a worker: a closed stdout must not stop them (their logs are lost, not their work). */
const WORKERS = new Set(['run', 'dev']);

/** The package's version, from its package.json (two folders above dist/src/cli/). */
export function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'));
  return String(pkg.version);
}

function usageOf(cmd: string | undefined): string {
  if (cmd === 'topics') return `${TOPICS_USAGE}\n`;
  const u = cmd === undefined ? undefined : COMMAND_USAGE[cmd];
  return u === undefined ? USAGE : `${u}\n`;
}

/**
 * What to tell a user about an error that is theirs to fix, without a stack trace; undefined for
 * an unexpected one.
 */
export function userMessage(e: unknown): string | undefined {
  if (e instanceof UsageError)
    return e.command === undefined ? `${e.message}\n` : `${e.message}\n\n${usageOf(e.command)}`;
  if (e instanceof ConfigError || e instanceof SluiceError) return `${e.message}\n`;
  for (let c: any = e, i = 0; c && i < 5; c = c.cause, i++) {
    if (c.code === 'EADDRINUSE' && c.syscall === 'listen') {
      const where = c.port === undefined ? '' : ` ${c.address ?? ''}:${c.port}`;
      return (
        `the HTTP port${where} is in use (another worker of this machine, or another program): ` +
        'give this worker another one with --http-port N (0 picks a free one), or turn the ' +
        'server off with --http.enabled false\n'
      );
    }
  }
  return undefined;
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  // `sluice topology job | head`: the reader is gone, which is no error of ours.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE') throw e;
    if (!WORKERS.has(cmd ?? '')) process.exit(0);
  });
  try {
    if (cmd === '--version' || cmd === '-V' || cmd === 'version') {
      process.stdout.write(`${version()}\n`);
      return 0;
    }
    if (cmd === undefined || cmd === 'help' || cmd === '--help' || cmd === '-h') {
      const topic = cmd === 'help' ? rest[0] : undefined;
      process.stdout.write(usageOf(topic));
      return cmd === undefined ? 1 : 0;
    }
    const run = COMMANDS[cmd];
    if (!run) {
      process.stderr.write(
        `sluice: unknown command ${JSON.stringify(cmd)}${didYouMean(cmd, Object.keys(COMMANDS))}\n\n${USAGE}`,
      );
      return 1;
    }
    if (cmd !== 'kafka' && (rest.includes('--help') || rest.includes('-h'))) {
      process.stdout.write(usageOf(cmd));
      return 0;
    }
    return await run(rest);
  } catch (e) {
    // Written outside the logger: scrub the secrets it knows of here too.
    const said = userMessage(e);
    if (said !== undefined) {
      process.stderr.write(scrubSecrets(`sluice: ${said}`));
      return 1;
    }
    process.stderr.write(scrubSecrets(`sluice: ${(e as Error)?.stack ?? String(e)}\n`));
    return 1;
  }
}
