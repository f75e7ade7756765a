import { parseArgs } from 'node:util';
import {
  externalBrokers,
  localKafkaStatus,
  type StartLocalKafkaOptions,
  startLocalKafka,
  stopLocalKafka,
} from '../dev/local-kafka.js';

const USAGE = `Usage: sluice kafka start|stop|status [options]

Runs Apache Kafka on 127.0.0.1 for tests, demos and benchmarks: one broker, or a cluster.
KAFKA_BROKERS set: start nothing and use that cluster. KAFKA_HOME set: run that distribution.
Otherwise the broker's jars are fetched once with Maven into ~/.cache/sluice.

Options:
  --version X     Kafka version (X.Y.Z, or 3.9); default SLUICE_KAFKA_VERSION, else the newest 4.x
  --port N        client port (default 9092; the controller uses N+1)
  --brokers N     start: a KRaft cluster of N nodes (broker and controller each, 1-9, default 1);
                  node i uses ports N+2(i-1) and N+2(i-1)+1, data in <data dir>/node-i; topics are
                  replicated min(3, N) times, min.insync.replicas 2 from 3 on. stop and status
                  find the cluster by its data dir
  --data-dir D    broker data (default ~/.cache/sluice/run/<port>)
  --wipe          stop: also delete the data dir; start: begin from an empty data dir

Exit status: 0 on success, 1 on failure; status exits 3 when no broker is running.`;

/**
 * `sluice kafka start|stop|status`: prints one human line per outcome to stdout, progress to
 * stderr, and errors to stderr. Resolves to the process exit code.
 *
 * @example
 * process.exitCode = await kafkaCommand(process.argv.slice(3));
 */
export async function kafkaCommand(args: string[]): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(args);
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n\n${USAGE}\n`);
    return 1;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const action = positionals[0];
  if (positionals.length !== 1 || (action !== 'start' && action !== 'stop' && action !== 'status')) {
    process.stderr.write(`${USAGE}\n`);
    return 1;
  }
  try {
    const port = values.port === undefined ? undefined : parsePort(values.port);
    const where = { port, dataDir: values['data-dir'] };
    if (values.brokers !== undefined && action !== 'start') throw new Error('--brokers is for start');
    const count = values.brokers === undefined ? undefined : parseBrokers(values.brokers);
    if (action === 'start')
      return await start(
        { ...where, version: values.version, ...(count === undefined ? {} : { brokers: count }) },
        values.wipe === true,
      );
    if (action === 'stop') return await stop(where, values.wipe === true);
    return await status(where);
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

function parse(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    strict: true,
    options: {
      version: { type: 'string' },
      port: { type: 'string' },
      brokers: { type: 'string' },
      'data-dir': { type: 'string' },
      wipe: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

async function start(opts: StartLocalKafkaOptions, wipe: boolean): Promise<number> {
  const external = externalBrokers(process.env);
  if (external) {
    say(`KAFKA_BROKERS is set: using ${external.join(',')}; no local broker started.`);
    return 0;
  }
  if (wipe) await stopLocalKafka({ port: opts.port, dataDir: opts.dataDir, wipe: true });
  const kafka = await startLocalKafka({ ...opts, log: (msg) => process.stderr.write(`${msg}\n`) });
  const where =
    kafka.nodes.length > 1
      ? `${kafka.brokers.join(',')} (${kafka.nodes.length} brokers, pids ${kafka.nodes.map((n) => n.pid).join(',')}, logs ${kafka.dataDir}/node-*/logs/server.log)`
      : `${kafka.brokers.join(',')} (pid ${kafka.pid}, log ${kafka.logFile})`;
  say(
    kafka.alreadyRunning
      ? `Kafka ${kafka.version} already running at ${where}`
      : `Kafka ${kafka.version} ready at ${where}`,
  );
  return 0;
}

async function stop(where: { port?: number; dataDir?: string }, wipe: boolean): Promise<number> {
  const stopped = await stopLocalKafka({ ...where, wipe });
  const which = where.dataDir ? `from ${where.dataDir}` : `on port ${where.port ?? 9092}`;
  const wiped = wipe ? '; data dir wiped' : '';
  say(stopped ? `Stopped Kafka ${which}${wiped}.` : `No local Kafka was running ${which}${wiped}.`);
  return 0;
}

async function status(where: { port?: number; dataDir?: string }): Promise<number> {
  const external = externalBrokers(process.env);
  if (external) say(`KAFKA_BROKERS is set: sluice uses ${external.join(',')}, not a local broker.`);
  const s = await localKafkaStatus(where);
  if (s.nodes) {
    for (const n of s.nodes)
      say(
        `node ${n.nodeId} at ${n.broker}: ${n.pid > 0 ? `pid ${n.pid}` : 'not running'} (log ${n.logFile})`,
      );
    const up = s.nodes.filter((n) => n.pid > 0).length;
    if (s.running) {
      say(`Kafka ${s.version} cluster of ${s.nodes.length} running at ${s.brokers?.join(',')}`);
      return 0;
    }
    say(
      `Kafka ${s.version} cluster: ${up} of ${s.nodes.length} nodes running${up === s.nodes.length ? ' but not answering' : ''}; start the rest with: sluice kafka start --brokers ${s.nodes.length}${where.port === undefined ? '' : ` --port ${where.port}`}${where.dataDir ? ` --data-dir ${where.dataDir}` : ''}`,
    );
    return 3;
  }
  if (s.running) {
    say(`Kafka ${s.version} running at ${s.brokers?.join(',')} (pid ${s.pid}, log ${s.logFile})`);
    return 0;
  }
  if (s.pid !== undefined) {
    say(
      `Kafka ${s.version} (pid ${s.pid}) is alive but not answering at ${s.brokers?.join(',')}; log ${s.logFile}`,
    );
  } else {
    say(`No local Kafka running on port ${where.port ?? 9092} (data dir ${s.dataDir}).`);
  }
  return 3;
}

function parseBrokers(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > 9) throw new Error(`--brokers must be 1-9, got "${text}"`);
  return n;
}

function parsePort(text: string): number {
  const port = Number(text);
  if (!/^\d+$/.test(text) || port < 1 || port > 65535) {
    throw new Error(`--port must be 1-65535, got "${text}"`);
  }
  return port;
}

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}
