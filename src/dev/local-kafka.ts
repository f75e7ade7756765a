import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { SluiceError } from '../errors.js';
import { brokerAnswers, probeBroker } from '../kafka/probe.js';
import { acquireDirLock, type DirLock, LOCK_FILE } from '../state/dir-lock.js';
import { StateLockedError } from '../state/errors.js';
import {
  commandLine,
  isAlive,
  portInUse,
  signalGroup,
  spawnDetached,
  waitForExit,
} from './broker-process.js';
import { ensureTools, javaCommand, lastLines, runCommand, type ToolProbe } from './java-tools.js';
import {
  type BrokerSecurity,
  brokerJvmArgs,
  type RunFiles,
  renderLogConfig,
  renderServerProperties,
  runFiles,
  SAFE_CREDENTIAL,
  toolJvmArgs,
} from './kafka-config.js';
import {
  defaultCacheDir,
  kafkaVersionMatches,
  type LoggingFlavour,
  loggingFlavour,
  parseKafkaVersion,
  resolveKafka,
} from './kafka-jars.js';

export { LocalKafkaUnavailableError, type ToolProbe } from './java-tools.js';
export type { BrokerSecurity, SaslUser } from './kafka-config.js';
export { DEFAULT_KAFKA_VERSIONS, type ResolveKafkaOptions, resolveKafka } from './kafka-jars.js';

/** A broker Sluice can talk to, started by us or found running. */
export interface LocalKafka {
  brokers: string[];
  /** `'external'` when it came from KAFKA_BROKERS. */
  version: string;
  /** 0 when we did not start it (KAFKA_BROKERS). */
  pid: number;
  /** The broker's stdout and stderr; '' for KAFKA_BROKERS. */
  logFile: string;
  dataDir: string;
  /** True when nothing was started: KAFKA_BROKERS is set, or our broker was already running. */
  alreadyRunning: boolean;
  /** Bootstrap addresses of the extra listeners asked for with `security`. */
  saslBrokers?: string[];
  sslBrokers?: string[];
}

export interface StartLocalKafkaOptions {
  /** `X.Y.Z` or `3.9`; default SLUICE_KAFKA_VERSION, else the newest 4.x that resolves. */
  version?: string;
  /** Client port, default 9092. */
  port?: number;
  /** Controller port, default `port + 1`. */
  controllerPort?: number;
  /** Default `~/.cache/sluice/run/<port>`. */
  dataDir?: string;
  /** Where resolved jars are cached; default `~/.cache/sluice`. */
  cacheDir?: string;
  /** Broker heap, default 768 MB: enough for tests and benchmarks, small enough to run a few brokers. */
  heapMb?: number;
  /** Default 90 s. */
  readyTimeoutMs?: number;
  log?: (msg: string) => void;
  /** Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Stand-in for `java -version` / `mvn -v` (tests). */
  toolProbe?: ToolProbe;
  /**
   * Extra listeners: SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 for the given users) and
   * SSL (from a PKCS12 keystore, optionally requiring client certificates). SCRAM users are created
   * when the data dir is formatted, so use a fresh data dir. Absent: PLAINTEXT only, as always.
   */
  security?: BrokerSecurity;
}

export interface LocalKafkaLocation {
  port?: number;
  dataDir?: string;
  env?: NodeJS.ProcessEnv;
}

export interface LocalKafkaStatus {
  /** The broker process is alive and answers metadata requests. */
  running: boolean;
  pid?: number;
  brokers?: string[];
  version?: string;
  logFile?: string;
  dataDir: string;
}

const DEFAULT_PORT = 9092;
const DEFAULT_HEAP_MB = 768;
const DEFAULT_READY_TIMEOUT_MS = 90_000;
/** Kafka's controlled shutdown takes a few seconds; beyond 30 s something is stuck. */
const STOP_TIMEOUT_MS = 30_000;
const STATUS_TIMEOUT_MS = 2_000;
const LOG_TAIL_LINES = 20;
/** A start holds the data dir's lock through format and readiness; a waiter allows this much over the latter. */
const LOCK_SLACK_MS = 60_000;
const LOCK_POLL_MS = 200;

interface BrokerState {
  version: string;
  brokers: string[];
  pid: number;
}

/**
 * Starts a single-node Kafka (KRaft, broker and controller in one JVM) on 127.0.0.1 and resolves
 * once it can create topics, run consumer groups and commit transactions. Idempotent: a broker we
 * started earlier on the same data dir is reused, unless it runs another version than the one asked
 * for (an error), and starts that overlap on one data dir take turns, so the later one waits for the
 * earlier one's broker and reuses it. With KAFKA_BROKERS set, starts nothing and returns
 * those brokers; with KAFKA_HOME set, runs the jars of that distribution; else fetches the jars from
 * Maven Central once (see {@link resolveKafka}).
 *
 * The broker is detached: it outlives this process until {@link stopLocalKafka}.
 *
 * @example
 * const kafka = await startLocalKafka({ port: 29092, log: console.error });
 * // … use kafka.brokers …
 * await stopLocalKafka({ port: 29092 });
 */
export async function startLocalKafka(opts: StartLocalKafkaOptions = {}): Promise<LocalKafka> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? (() => {});
  const external = externalBrokers(env);
  if (external) {
    return { brokers: external, version: 'external', pid: 0, logFile: '', dataDir: '', alreadyRunning: true };
  }
  const port = checkPort(opts.port ?? DEFAULT_PORT, 'port');
  const controllerPort = checkPort(opts.controllerPort ?? port + 1, 'controllerPort');
  if (controllerPort === port) throw invalid('controllerPort must differ from port');
  const heapMb = opts.heapMb ?? DEFAULT_HEAP_MB;
  if (!Number.isInteger(heapMb) || heapMb < 1) {
    throw invalid(`heapMb must be a positive integer, got ${heapMb}`);
  }
  const readyTimeoutMs = opts.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
  const security = checkSecurity(opts.security, [port, controllerPort]);
  const secured = {
    ...(security?.sasl ? { saslBrokers: [`127.0.0.1:${security.sasl.port}`] } : {}),
    ...(security?.ssl ? { sslBrokers: [`127.0.0.1:${security.ssl.port}`] } : {}),
  };
  const files = runFiles(dataDirFor(port, opts.dataDir, env));
  const reuse = (running: BrokerState) =>
    reuseBroker(running, {
      files,
      asked: askedVersion(opts, env),
      stopCommand: `sluice kafka stop --port ${port}${opts.dataDir === undefined ? '' : ` --data-dir ${files.dataDir}`}`,
      readyTimeoutMs,
      log,
      secured,
    });

  const running = await findOurBroker(files);
  if (running) return reuse(running);
  const ports = [port, controllerPort, security?.sasl?.port, security?.ssl?.port];
  // Fail fast on a busy port, before resolving jars; but not while another start of this data dir
  // holds its lock: its broker may have bound the port before writing its pid file (a race seen
  // on a loaded machine). The check after the lock below decides then.
  if (!existsSync(join(files.dataDir, LOCK_FILE))) await checkPortsFree(ports, files);

  const { version, libsDir } = await locateJars(opts, env, log);
  const flavour = loggingFlavour(version);
  await ensureTools(['java'], {
    probe: opts.toolProbe,
    minJavaMajor: parseKafkaVersion(version).major >= 4 ? 17 : 11,
  });
  const lock = await lockDataDir(files, readyTimeoutMs + LOCK_SLACK_MS, log);
  try {
    // Another start may have held the lock until its broker was ready: then that broker is ours.
    const started = await findOurBroker(files);
    if (started) return await reuse(started);
    await checkPortsFree(ports, files);
    return await spawnBroker(files, {
      version,
      flavour,
      libsDir,
      port,
      controllerPort,
      heapMb,
      readyTimeoutMs,
      env,
      log,
      security,
      secured,
    });
  } finally {
    lock.release();
  }
}

/** Where clients reach the extra listeners of `security`, as {@link LocalKafka} reports them. */
type SecuredBrokers = Pick<LocalKafka, 'saslBrokers' | 'sslBrokers'>;

/** A version asked for, and in what words to name it. */
interface AskedVersion {
  /** `X.Y.Z`, `3.9` or `4`. */
  version: string;
  /** `3.9`, or `3.9 (SLUICE_KAFKA_VERSION)`. */
  label: string;
}

/** `--version`, else SLUICE_KAFKA_VERSION; none with KAFKA_HOME, whose jars run whatever was asked (see locateJars). */
function askedVersion(opts: StartLocalKafkaOptions, env: NodeJS.ProcessEnv): AskedVersion | undefined {
  if (env.KAFKA_HOME) return undefined;
  if (opts.version !== undefined) return { version: opts.version, label: opts.version };
  const fromEnv = env.SLUICE_KAFKA_VERSION;
  return fromEnv ? { version: fromEnv, label: `${fromEnv} (SLUICE_KAFKA_VERSION)` } : undefined;
}

/**
 * Hands back the broker already started from this data dir, once it answers. A broker of another
 * version than the one asked for is refused: reusing it would quietly give the caller the wrong Kafka.
 */
async function reuseBroker(
  running: BrokerState,
  c: {
    files: RunFiles;
    asked: AskedVersion | undefined;
    /** How to stop this broker, for error messages. */
    stopCommand: string;
    readyTimeoutMs: number;
    log: (msg: string) => void;
    secured: SecuredBrokers;
  },
): Promise<LocalKafka> {
  const { files } = c;
  if (c.asked && !kafkaVersionMatches(c.asked.version, running.version)) {
    throw new SluiceError(
      'SLUICE_KAFKA',
      `Kafka ${running.version} is already running at ${running.brokers.join(',')} (pid ${running.pid}, data ` +
        `${files.dataDir}), not the ${c.asked.label} asked for; stop it first with: ${c.stopCommand}`,
    );
  }
  if (!(await brokerAnswers(running.brokers, STATUS_TIMEOUT_MS))) {
    // Alive but not answering: most likely another `start` is still waiting for it.
    c.log(`Waiting for the broker already starting at ${running.brokers.join(',')} (pid ${running.pid})`);
    await probeBroker(running.brokers, { timeoutMs: c.readyTimeoutMs }).catch(async (err) => {
      throw await startFailure(
        `Kafka (pid ${running.pid}) is running but not ready; try ${c.stopCommand}`,
        files,
        err,
      );
    });
  }
  return { ...running, ...c.secured, logFile: files.logFile, dataDir: files.dataDir, alreadyRunning: true };
}

/** Throws when something that is not our broker listens on one of `ports` (undefined: not used). */
async function checkPortsFree(ports: readonly (number | undefined)[], files: RunFiles): Promise<void> {
  for (const p of ports) {
    if (p === undefined) continue;
    if (await portInUse(p)) {
      throw new SluiceError(
        'SLUICE_KAFKA',
        `Cannot start Kafka: port ${p} on 127.0.0.1 is in use by a process sluice did not start from ` +
          `${files.dataDir}; stop it or choose another port.`,
      );
    }
  }
}

/**
 * Takes the data dir's start lock (`<dataDir>/.lock`, O_EXCL, holding our pid), waiting while another
 * start holds it. Formatting, spawning and the wait for readiness are one step per data dir: two
 * starts that overlap would format the same storage and bind the same ports, and the loser's clean-up
 * would delete the winner's pid file. A lock whose owner is gone is taken over (see acquireDirLock).
 */
async function lockDataDir(files: RunFiles, timeoutMs: number, log: (msg: string) => void): Promise<DirLock> {
  await mkdir(files.dataDir, { recursive: true });
  const deadline = Date.now() + timeoutMs;
  let told = false;
  for (;;) {
    try {
      return await acquireDirLock(files.dataDir);
    } catch (err) {
      if (!(err instanceof StateLockedError)) throw err;
      if (Date.now() >= deadline) {
        throw new SluiceError(
          'SLUICE_KAFKA',
          `Another start of Kafka from ${files.dataDir} (pid ${err.ownerPid ?? '?'}) did not finish in ` +
            `${Math.round(timeoutMs / 1000)} s; if that process is gone, delete ${join(files.dataDir, LOCK_FILE)}`,
          { cause: err },
        );
      }
      if (!told) log(`Waiting for another start of Kafka from ${files.dataDir} (pid ${err.ownerPid ?? '?'})`);
      told = true;
      await sleep(LOCK_POLL_MS);
    }
  }
}

/** Formats the data dir if need be, starts the broker and waits until it is ready; kills it if not. */
async function spawnBroker(
  files: RunFiles,
  c: {
    version: string;
    flavour: LoggingFlavour;
    libsDir: string;
    port: number;
    controllerPort: number;
    heapMb: number;
    readyTimeoutMs: number;
    env: NodeJS.ProcessEnv;
    log: (msg: string) => void;
    security: BrokerSecurity | undefined;
    secured: SecuredBrokers;
  },
): Promise<LocalKafka> {
  const { version, env, log } = c;
  await prepareDataDir(files, c);

  log(`Starting Kafka ${version} on 127.0.0.1:${c.port} (data ${files.dataDir})`);
  const brokers = [`127.0.0.1:${c.port}`];
  const broker = await spawnDetached(javaCommand(env), brokerJvmArgs(c.flavour, c.heapMb, files, c.libsDir), {
    cwd: files.dataDir,
    logFile: files.logFile,
    env,
  });
  const state: BrokerState = { version, brokers, pid: broker.pid };
  await writeFile(files.pidFile, `${broker.pid}\n`);
  await writeFile(files.stateFile, `${JSON.stringify(state)}\n`);

  const abort = new AbortController();
  const ready = probeBroker(brokers, { timeoutMs: c.readyTimeoutMs, signal: abort.signal });
  ready.catch(() => {});
  try {
    await Promise.race([ready, broker.exited]);
  } catch (err) {
    const why = broker.hasExited() ? 'exited during start-up' : 'did not become ready';
    abort.abort();
    signalGroup(broker.pid, 'SIGKILL');
    await waitForExit(broker.pid, 5_000);
    await removeState(files);
    throw await startFailure(`Kafka ${version} ${why}`, files, err);
  }
  log(`Kafka ${version} ready at ${brokers.join(',')}`);
  return {
    brokers,
    version,
    pid: broker.pid,
    logFile: files.logFile,
    dataDir: files.dataDir,
    alreadyRunning: false,
    ...c.secured,
  };
}

/**
 * Stops the broker started from this data dir (SIGTERM, then SIGKILL after 30 s). Resolves to true
 * when a broker was stopped. With `wipe`, also deletes the data dir (topics, offsets, logs).
 *
 * @example
 * await stopLocalKafka({ port: 29092, wipe: true });
 */
export async function stopLocalKafka(opts: LocalKafkaLocation & { wipe?: boolean } = {}): Promise<boolean> {
  const env = opts.env ?? process.env;
  const files = runFiles(dataDirFor(checkPort(opts.port ?? DEFAULT_PORT, 'port'), opts.dataDir, env));
  const running = await findOurBroker(files);
  if (running) {
    signalGroup(running.pid, 'SIGTERM');
    if (!(await waitForExit(running.pid, STOP_TIMEOUT_MS))) {
      signalGroup(running.pid, 'SIGKILL');
      await waitForExit(running.pid, 5_000);
    }
  }
  await removeState(files);
  if (opts.wipe && existsSync(files.dataDir)) {
    const entries = await readdir(files.dataDir);
    if (entries.length > 0 && !existsSync(files.marker)) {
      throw invalid(`Refusing to wipe ${files.dataDir}: it was not created by sluice kafka start`);
    }
    await rm(files.dataDir, { recursive: true, force: true });
  }
  return running !== undefined;
}

/**
 * Whether the broker started from this data dir is running and answering.
 *
 * @example
 * const { running, brokers } = await localKafkaStatus({ port: 29092 });
 */
export async function localKafkaStatus(opts: LocalKafkaLocation = {}): Promise<LocalKafkaStatus> {
  const env = opts.env ?? process.env;
  const files = runFiles(dataDirFor(checkPort(opts.port ?? DEFAULT_PORT, 'port'), opts.dataDir, env));
  const running = await findOurBroker(files);
  if (!running) return { running: false, dataDir: files.dataDir };
  const answers = await brokerAnswers(running.brokers, STATUS_TIMEOUT_MS);
  return { running: answers, ...running, logFile: files.logFile, dataDir: files.dataDir };
}

/** The KAFKA_BROKERS list (comma-separated), or undefined when unset or blank. */
export function externalBrokers(env: NodeJS.ProcessEnv): string[] | undefined {
  const list = (env.KAFKA_BROKERS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  return list.length > 0 ? list : undefined;
}

function dataDirFor(port: number, dataDir: string | undefined, env: NodeJS.ProcessEnv): string {
  return resolve(dataDir ?? join(defaultCacheDir(env), 'run', String(port)));
}

async function locateJars(
  opts: StartLocalKafkaOptions,
  env: NodeJS.ProcessEnv,
  log: (msg: string) => void,
): Promise<{ version: string; libsDir: string }> {
  if (!env.KAFKA_HOME) return resolveKafka({ ...opts, log, env });
  const libsDir = join(env.KAFKA_HOME, 'libs');
  const jars = existsSync(libsDir) ? await readdir(libsDir) : [];
  const version = jars
    .map((j) => /^kafka_2\.1[23]-(\d+\.\d+\.\d+)\.jar$/.exec(j)?.[1])
    .find((v) => v !== undefined);
  if (!version) {
    throw invalid(`KAFKA_HOME=${env.KAFKA_HOME} is not a Kafka distribution (no libs/kafka_2.13-*.jar)`);
  }
  if (opts.version && opts.version !== version) {
    log(`Using Kafka ${version} from KAFKA_HOME, not ${opts.version}`);
  }
  return { version, libsDir };
}

/**
 * Writes the configs and formats the KRaft storage, once per data dir. A data dir formatted by
 * another Kafka version is wiped: metadata cannot always move between versions, and this broker
 * is for development.
 */
async function prepareDataDir(
  files: RunFiles,
  c: {
    version: string;
    flavour: LoggingFlavour;
    port: number;
    controllerPort: number;
    libsDir: string;
    env: NodeJS.ProcessEnv;
    log: (msg: string) => void;
    security?: BrokerSecurity | undefined;
  },
): Promise<void> {
  await mkdir(files.logsDir, { recursive: true });
  await writeFile(files.marker, 'Data of a local Kafka broker started by sluice kafka start.\n');
  await writeFile(
    files.serverProperties,
    renderServerProperties({
      flavour: c.flavour,
      port: c.port,
      controllerPort: c.controllerPort,
      kraftDir: files.kraftDir,
      security: c.security,
    }),
  );
  await writeFile(files.brokerLogConfig, renderLogConfig(c.flavour, 'broker'));
  await writeFile(files.toolLogConfig, renderLogConfig(c.flavour, 'tool'));

  const formattedBy = existsSync(files.formattedBy)
    ? (await readFile(files.formattedBy, 'utf8')).trim()
    : undefined;
  const formatted = existsSync(join(files.kraftDir, 'meta.properties'));
  const scramFile = join(files.dataDir, 'scram-users');
  const scramUsers = (c.security?.sasl?.users ?? [])
    .map((u) => u.username)
    .sort()
    .join(',');
  if (formatted && (formattedBy === undefined || formattedBy === c.version)) {
    const had = existsSync(scramFile) ? (await readFile(scramFile, 'utf8')).trim() : '';
    if (scramUsers !== '' && had !== scramUsers) {
      throw invalid(
        `${files.dataDir} was formatted with SCRAM users [${had}], not [${scramUsers}]: SCRAM users are ` +
          'created when the data dir is formatted; use a new data dir or stop with --wipe',
      );
    }
    return;
  }
  if (formatted) {
    c.log(`Wiping ${files.kraftDir}: it was formatted by Kafka ${formattedBy}, not ${c.version}`);
    await rm(files.kraftDir, { recursive: true, force: true });
  }
  const format = await runCommand(javaCommand(c.env), [
    ...toolJvmArgs(c.flavour, files, c.libsDir, 'kafka.tools.StorageTool'),
    'format',
    '-t',
    clusterId(),
    '-c',
    files.serverProperties,
    '--ignore-formatted',
    // SCRAM credentials live in the cluster metadata; KRaft can seed them at format time (KIP-900).
    ...(c.security?.sasl?.users ?? []).flatMap((u) =>
      ['SCRAM-SHA-256', 'SCRAM-SHA-512'].flatMap((m) => [
        '--add-scram',
        `${m}=[name=${u.username},password=${u.password}]`,
      ]),
    ),
  ]);
  if (format.code !== 0) {
    throw new SluiceError(
      'SLUICE_KAFKA',
      `Formatting ${files.kraftDir} failed (StorageTool exited with ${format.code}):\n${lastLines(format.output, 20)}`,
    );
  }
  await writeFile(files.formattedBy, `${c.version}\n`);
  if (scramUsers !== '') await writeFile(scramFile, `${scramUsers}\n`);
}

/** Validates the extra listeners: ports distinct and valid, credentials safe to put in JAAS. */
function checkSecurity(sec: BrokerSecurity | undefined, taken: number[]): BrokerSecurity | undefined {
  if (!sec) return undefined;
  const ports = [...taken];
  const usePort = (p: number, name: string) => {
    checkPort(p, name);
    if (ports.includes(p)) throw invalid(`${name} ${p} is already used by another listener`);
    ports.push(p);
  };
  if (sec.sasl) {
    usePort(sec.sasl.port, 'security.sasl.port');
    if (sec.sasl.users.length === 0) throw invalid('security.sasl.users must name at least one user');
    for (const u of sec.sasl.users) {
      if (!SAFE_CREDENTIAL.test(u.username) || !SAFE_CREDENTIAL.test(u.password)) {
        throw invalid(
          `security.sasl.users: user names and passwords may hold only letters, digits, '.', '_' and '-' (1-64)`,
        );
      }
    }
  }
  if (sec.ssl) {
    usePort(sec.ssl.port, 'security.ssl.port');
    for (const f of [sec.ssl.keystore, sec.ssl.clientCa]) {
      if (f !== undefined && !existsSync(f)) throw invalid(`security.ssl: no file ${f}`);
    }
    if (!SAFE_CREDENTIAL.test(sec.ssl.keystorePassword))
      throw invalid(`security.ssl.keystorePassword may hold only letters, digits, '.', '_' and '-'`);
  }
  return sec;
}

/**
 * A cluster id as `kafka-storage random-uuid` makes it: a version-4 UUID in unpadded base64url that
 * does not start with '-'. Made here to spare a JVM start (a second or more on a small machine).
 */
export function clusterId(): string {
  for (;;) {
    const bytes = randomBytes(16);
    bytes[6] = (bytes[6]! & 0x0f) | 0x40;
    bytes[8] = (bytes[8]! & 0x3f) | 0x80;
    const id = bytes.toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

/** The broker recorded in the data dir, if that process is still alive and is a Kafka broker. */
async function findOurBroker(files: RunFiles): Promise<BrokerState | undefined> {
  let state: BrokerState;
  try {
    const pid = Number((await readFile(files.pidFile, 'utf8')).trim());
    state = { ...(JSON.parse(await readFile(files.stateFile, 'utf8')) as BrokerState), pid };
  } catch {
    return undefined;
  }
  if (!Number.isInteger(state.pid) || state.pid <= 0 || !isAlive(state.pid)) return undefined;
  // The pid may have been reused by an unrelated process since; where /proc exists, check it is ours.
  const cmdline = commandLine(state.pid);
  if (
    cmdline !== undefined &&
    !(cmdline.includes('kafka.Kafka') && cmdline.includes(files.serverProperties))
  ) {
    return undefined;
  }
  return state;
}

async function removeState(files: RunFiles): Promise<void> {
  await rm(files.pidFile, { force: true });
  await rm(files.stateFile, { force: true });
}

async function startFailure(what: string, files: RunFiles, cause: unknown): Promise<SluiceError> {
  const reason = cause instanceof Error ? cause.message : String(cause);
  const log = await readFile(files.logFile, 'utf8').catch(() => '');
  const tail = lastLines(log, LOG_TAIL_LINES) || '(the log is empty)';
  return new SluiceError('SLUICE_KAFKA', `${what}: ${reason}\nLast lines of ${files.logFile}:\n${tail}`, {
    cause,
  });
}

function checkPort(port: number, name: string): number {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw invalid(`${name} must be 1-65535, got ${port}`);
  }
  return port;
}

function invalid(message: string): SluiceError {
  return new SluiceError('SLUICE_CONFIG_INVALID', message);
}
