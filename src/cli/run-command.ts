import type { App } from '../api/app.js';
import { brokersSource, loadConfig } from '../config/load.js';
import type { SluiceConfig } from '../config/schema.js';
import { startLocalKafka } from '../dev/local-kafka.js';
import { startWorker } from '../runtime/start.js';
import { startThreaded } from '../runtime/threads/threaded.js';
import { externalTopics } from '../runtime/topics.js';
import { closeToExisting, typoWarning } from '../suggest.js';
import { parseArgs } from './args.js';
import { stopWhenLauncherExits } from './launcher-watch.js';
import { loadJob } from './load-job.js';
import { withAdmin } from './topics-command.js';
import { topologyDot, topologyJson } from './topology-format.js';
import { UsageError } from './usage.js';

export function jobArg(positionals: string[], cmd: string): string {
  const f = positionals[0];
  if (!f) throw new UsageError(`${cmd} needs a job file`, cmd);
  if (positionals.length > 1)
    throw new UsageError(
      `${cmd} takes one job file, got ${positionals.map((p) => JSON.stringify(p)).join(' ')}`,
      cmd,
    );
  return f;
}

/**
 * Runs one worker until SIGTERM/SIGINT (graceful: checkpoint; a dynamic member, or a static one
 * with kafka.leaveGroupOnClose, leaves the group) or a fatal error.
 */
async function runWorker(
  app: App,
  jobFile: string,
  config: Readonly<SluiceConfig>,
  onStarted?: (running: { http: { url: string } | undefined }) => void,
): Promise<number> {
  let fatal: Error | undefined;
  let wake: () => void = () => undefined;
  const stopped = new Promise<void>((r) => {
    wake = r;
  });
  const onFatal = (e: Error) => {
    fatal = e;
    wake();
  };
  // Several stream threads: each loads the job itself (the app above checked it loads and builds).
  const running =
    config.processing.threads > 1
      ? await startThreaded(jobFile, config, { onFatal })
      : await startWorker(app, config, { onFatal });
  onStarted?.(running);
  const onSignal = (sig: string) => {
    running.logger.info({ signal: sig }, 'shutting down');
    wake();
  };
  process.once('SIGTERM', () => onSignal('SIGTERM'));
  process.once('SIGINT', () => onSignal('SIGINT'));
  const unwatch = stopWhenLauncherExits(() => onSignal('launcher exited (npm/npx got SIGTERM)'));
  await stopped;
  unwatch();
  // A second signal during shutdown ends the process at once.
  process.once('SIGINT', () => process.exit(130));
  process.once('SIGTERM', () => process.exit(143));
  // A shutdown that cannot finish (a broker gone, a stuck fetch) must not hang the process:
  // after the deadline it exits non-zero; under exactly-once nothing uncommitted is lost.
  const deadline = setTimeout(() => {
    running.logger.error('graceful shutdown did not finish within 30 s; exiting');
    process.exit(1);
  }, 30_000);
  deadline.unref();
  await running.stop();
  clearTimeout(deadline);
  exitWhenStuck(running.logger, fatal ? 1 : 0);
  return fatal ? 1 : 0;
}

/**
 * Everything is committed and released at this point, yet once, in
 * test/integration/broker-outage.test.ts, a worker SIGTERMed after a broker outage stayed alive
 * for minutes: something (most likely a kafkajs socket or retry timer) kept the event loop going;
 * the cause was not pinned down. If the process has not ended by itself within 2 s, end it,
 * naming what was still open, so the next occurrence says what it was.
 */
function exitWhenStuck(logger: { warn: (o: object, m: string) => void }, code: number): void {
  setTimeout(() => {
    logger.warn(
      { open: process.getActiveResourcesInfo().filter((r) => r !== 'Timeout') },
      'stopped, but something kept the process alive; exiting',
    );
    process.exit(code);
  }, 2000).unref();
}

/** `--leave-group-on-stop`: the switch for `kafka.leaveGroupOnClose true` (scale-down on SIGTERM). */
const LEAVE_SWITCH = 'leave-group-on-stop';

/** `--allow-state-change`: the switch for `processing.allowStateChange true` (see `sluice plan`). */
const ALLOW_SWITCH = 'allow-state-change';

function settingsOf(args: ReturnType<typeof parseArgs>): Array<[string, string]> {
  const out: Array<[string, string]> = [...args.settings];
  const leave = args.switches.get(LEAVE_SWITCH);
  if (leave !== undefined) out.push(['kafka.leaveGroupOnClose', leave]);
  const allow = args.switches.get(ALLOW_SWITCH);
  if (allow !== undefined) out.push(['processing.allowStateChange', allow]);
  return out;
}

export async function runCommand(argv: string[]): Promise<number> {
  const args = parseArgs(argv, [LEAVE_SWITCH, ALLOW_SWITCH]);
  const config = loadConfig({ file: args.configFile, flags: settingsOf(args) });
  const jobFile = jobArg(args.positionals, 'run');
  return runWorker(await loadJob(jobFile), jobFile, config);
}

/** Partitions of the topics `sluice dev` creates on the local broker. */
const DEV_PARTITIONS = 4;

/**
 * `sluice dev`: like run, but when no cluster is configured (no `--brokers`, `SLUICE_KAFKA_BROKERS`,
 * `KAFKA_BROKERS` or `kafka.brokers` in the config file) it starts, or reuses, the local Kafka
 * (`--kafka-port`, default 9092) and creates the job's missing input and output topics there, so
 * a job runs on a fresh machine with one command. On a configured cluster nothing is created.
 */
export async function devCommand(argv: string[]): Promise<number> {
  const args = parseArgs(argv, [LEAVE_SWITCH, ALLOW_SWITCH], ['kafka-port']);
  const jobFile = jobArg(args.positionals, 'dev');
  const app = await loadJob(jobFile);
  const flags = settingsOf(args);
  const configuredBy = brokersSource({ file: args.configFile, flags });
  if (configuredBy === undefined) {
    const port = args.switches.has('kafka-port') ? Number(args.switches.get('kafka-port')) : undefined;
    if (port !== undefined && !(Number.isInteger(port) && port > 0 && port < 65536))
      throw new UsageError(
        `--kafka-port must be a port number, not ${args.switches.get('kafka-port')}`,
        'dev',
      );
    // Every other setting is checked before a broker is started for it (a bad config fails fast).
    loadConfig({ file: args.configFile, flags: [...flags, ['kafka.brokers', `127.0.0.1:${port ?? 9092}`]] });
    const k = await startLocalKafka({ ...(port === undefined ? {} : { port }), log: (m) => say(m) });
    say(
      `local Kafka ${k.version} at ${k.brokers.join(',')} (log ${k.logFile}); stop it with: sluice kafka stop`,
    );
    flags.push(['kafka.brokers', k.brokers.join(',')]);
  }
  const config = loadConfig({ file: args.configFile, flags });
  if (configuredBy === undefined) {
    const { inputs, outputs } = externalTopics(app.topology());
    const created = await withAdmin(config, async (admin) => {
      for (const p of closeToExisting([...inputs, ...outputs], await admin.listTopics())) say(typoWarning(p));
      return admin.ensureTopics(
        [...inputs, ...outputs].map((topic) => ({ topic, partitions: DEV_PARTITIONS })),
      );
    });
    if (created.length > 0) say(`created topics ${created.join(', ')} (${DEV_PARTITIONS} partitions)`);
  } else {
    say(`using the cluster set by ${configuredBy}: ${config.kafka.brokers.join(',')}`);
  }
  return runWorker(app, jobFile, config, (running) => {
    if (running.http) say(`status page: ${running.http.url}/ (metrics ${running.http.url}/metrics)`);
  });
}

function say(line: string): void {
  process.stderr.write(`${line}\n`);
}

export async function topologyCommand(argv: string[]): Promise<number> {
  const args = parseArgs(argv, [], ['format']);
  const format = args.switches.get('format') ?? 'text';
  if (!['text', 'json', 'dot'].includes(format))
    throw new UsageError(`--format must be text, json or dot, not ${JSON.stringify(format)}`, 'topology');
  const app = await loadJob(jobArg(args.positionals, 'topology'));
  const t = app.topology();
  for (const w of t.warnings) process.stderr.write(`warning: ${w}\n`);
  if (format === 'json') {
    process.stdout.write(`${JSON.stringify(topologyJson(t), null, 2)}\n`);
    return 0;
  }
  if (format === 'dot') {
    process.stdout.write(topologyDot(t));
    return 0;
  }
  process.stdout.write(`${t.describe()}\n`);
  if (t.repartitionTopics.size > 0)
    process.stdout.write(`Repartition topics: ${[...t.repartitionTopics.keys()].join(', ')}\n`);
  if (t.stores.length > 0)
    process.stdout.write(
      `Stores: ${t.stores.map((s) => `${s.name} (changelog ${s.changelog})`).join(', ')}\n`,
    );
  return 0;
}
