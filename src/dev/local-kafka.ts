import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { SluiceError } from '../errors.js';
import { brokerAnswers, liveBrokerCount, probeBroker } from '../kafka/probe.js';
import { acquireDirLock, type DirLock, LOCK_FILE } from '../state/dir-lock.js';
import { StateLockedError } from '../state/errors.js';
import {
  commandLine,
  isAlive,
  portInUse,
  START_MARK,
  signalGroup,
  spawnDetached,
  waitForExit,
} from './broker-process.js';
import { ensureTools, javaCommand, lastLines, runCommand, type ToolProbe } from './java-tools.js';
import {
  type BrokerSecurity,
  brokerJvmArgs,
  LISTENER_NAME,
  type NodeListener,
  RESERVED_LISTENER_NAMES,
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
  /** Every node (one for a single broker; none for KAFKA_BROKERS), in node id order. */
  nodes: LocalKafkaNode[];
  /** The advertised addresses of each extra listener asked for with `listeners`, by name. */
  listeners?: Record<string, string[]>;
}

/** One node of a local cluster (broker and controller in one JVM). */
export interface LocalKafkaNode {
  nodeId: number;
  /** Its PLAINTEXT client address. */
  broker: string;
  controllerPort: number;
  /** 0 when not running (status). */
  pid: number;
  logFile: string;
}

/** Extra PLAINTEXT listeners, one port per node (see {@link StartLocalKafkaOptions.listeners}). */
export interface ExtraListener {
  /** Upper-case name, e.g. `PROXIED`; not PLAINTEXT, CONTROLLER, SASL_PLAINTEXT or SSL. */
  name: string;
  /** The port node `i + 1` binds. */
  ports: number[];
  /** What metadata served on this listener names as node `i + 1`'s address; default `ports`. */
  advertisedPorts?: number[];
}

export interface StartLocalKafkaOptions {
  /** `X.Y.Z` or `3.9`; default SLUICE_KAFKA_VERSION, else the newest 4.x that resolves. */
  version?: string;
  /** Client port (of the first node), default 9092. */
  port?: number;
  /** Controller port, default `port + 1` (a single broker only). */
  controllerPort?: number;
  /**
   * Nodes of the cluster, default 1. With more, each node is a broker and a controller (a static
   * quorum of all of them): node `i + 1` takes client port `port + 2i` and controller port
   * `port + 2i + 1`, and keeps its data in `<dataDir>/node-<i + 1>`. New topics and the internal
   * ones are replicated min(3, brokers) times with min.insync.replicas 2 from 3 copies on. A
   * start finding some nodes of the cluster running starts only the others (restarts a killed one).
   */
  brokers?: number;
  /**
   * More PLAINTEXT listeners (any broker count), e.g. one per node that a TCP proxy fronts: its
   * advertised ports are the proxy's, so clients bootstrapped there stay behind the proxy.
   */
  listeners?: ExtraListener[];
  /** Default `~/.cache/sluice/run/<port>`. */
  dataDir?: string;
  /** Where resolved jars are cached; default `~/.cache/sluice`. */
  cacheDir?: string;
  /** Broker heap, default 768 MB (512 MB per node of a cluster): enough for tests and benchmarks, small enough to run a few brokers. */
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

/** Where a stop applies; `node`: only that node of a cluster (its id, from 1). */
export interface StopLocalKafkaOptions extends LocalKafkaLocation {
  wipe?: boolean;
  node?: number;
}

export interface LocalKafkaStatus {
  /** The broker process is alive and answers metadata requests. */
  running: boolean;
  pid?: number;
  brokers?: string[];
  version?: string;
  logFile?: string;
  dataDir: string;
  /** A cluster's nodes (pid 0: not running); absent for a single broker. */
  nodes?: LocalKafkaNode[];
}

const DEFAULT_PORT = 9092;
const DEFAULT_HEAP_MB = 768;
const DEFAULT_CLUSTER_HEAP_MB = 512;
const DEFAULT_READY_TIMEOUT_MS = 90_000;
/** Three JVMs start on a small machine, and the quorum forms only once a majority runs. */
const DEFAULT_CLUSTER_READY_TIMEOUT_MS = 180_000;
const MAX_BROKERS = 9;
/** A cluster's layout, in its root data dir: `{ version, port, nodes }`. */
const CLUSTER_FILE = 'cluster.json';
/** A cluster's id, kept so that a node formatted later joins the same cluster. */
const CLUSTER_ID_FILE = 'cluster-id';
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
    return {
      brokers: external,
      version: 'external',
      pid: 0,
      logFile: '',
      dataDir: '',
      alreadyRunning: true,
      nodes: [],
    };
  }
  const count = opts.brokers ?? 1;
  if (!Number.isInteger(count) || count < 1 || count > MAX_BROKERS) {
    throw invalid(`brokers must be an integer from 1 to ${MAX_BROKERS}, got ${count}`);
  }
  if (count > 1) return startCluster(opts, count, env, log);
  const port = checkPort(opts.port ?? DEFAULT_PORT, 'port');
  const controllerPort = checkPort(opts.controllerPort ?? port + 1, 'controllerPort');
  if (controllerPort === port) throw invalid('controllerPort must differ from port');
  const heapMb = opts.heapMb ?? DEFAULT_HEAP_MB;
  if (!Number.isInteger(heapMb) || heapMb < 1) {
    throw invalid(`heapMb must be a positive integer, got ${heapMb}`);
  }
  const readyTimeoutMs = opts.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
  const security = checkSecurity(opts.security, [port, controllerPort]);
  const listeners = checkListeners(opts.listeners, 1, [
    port,
    controllerPort,
    ...[security?.sasl?.port, security?.ssl?.port].filter((p) => p !== undefined),
  ]);
  const secured = {
    ...(security?.sasl ? { saslBrokers: [`127.0.0.1:${security.sasl.port}`] } : {}),
    ...(security?.ssl ? { sslBrokers: [`127.0.0.1:${security.ssl.port}`] } : {}),
  };
  const files = runFiles(dataDirFor(port, opts.dataDir, env));
  const cluster = await readCluster(files.dataDir);
  if (cluster && (await findCluster(files.dataDir, cluster)).some((n) => n !== undefined)) {
    throw invalid(
      `A cluster of ${cluster.nodes} brokers runs from ${files.dataDir}; start it with brokers: ${cluster.nodes} ` +
        `(--brokers ${cluster.nodes}), or stop it first`,
    );
  }
  const reuse = (running: BrokerState) =>
    reuseBroker(running, {
      files,
      asked: askedVersion(opts, env),
      stopCommand: `sluice kafka stop --port ${port}${opts.dataDir === undefined ? '' : ` --data-dir ${files.dataDir}`}`,
      readyTimeoutMs,
      log,
      secured,
      listeners: listenerAddresses(listeners),
    });

  const running = await findOurBroker(files);
  if (running) return reuse(running);
  const ports = [
    port,
    controllerPort,
    security?.sasl?.port,
    security?.ssl?.port,
    ...nodeListeners(listeners, 0).map((l) => l.port),
  ];
  // Fail fast on a busy port, before resolving jars; but not while another start of this data dir
  // holds its lock: its broker may have bound the port before writing its pid file (a race seen
  // on a loaded machine). The check after the lock below decides then. The lock is looked at again
  // after a busy port: the other start may have taken it, and its broker bound the port, between
  // the first look and the port check (seen in CI).
  const otherStart = () => existsSync(join(files.dataDir, LOCK_FILE));
  if (!otherStart()) {
    await checkPortsFree(ports, files).catch(async (err) => {
      if (otherStart() || (await findOurBroker(files))) return;
      throw err;
    });
  }

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
      listeners,
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
    listeners: Record<string, string[]> | undefined;
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
  return {
    ...running,
    ...c.secured,
    ...(c.listeners ? { listeners: c.listeners } : {}),
    logFile: files.logFile,
    dataDir: files.dataDir,
    alreadyRunning: true,
    nodes: [singleNode(running, files)],
  };
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
    listeners: ExtraListener[];
  },
): Promise<LocalKafka> {
  const { version, env, log } = c;
  await prepareDataDir(files, {
    ...c,
    properties: renderServerProperties({
      flavour: c.flavour,
      port: c.port,
      controllerPort: c.controllerPort,
      kraftDir: files.kraftDir,
      security: c.security,
      listeners: nodeListeners(c.listeners, 0),
    }),
    clusterId: clusterId(),
  });

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
  const listeners = listenerAddresses(c.listeners);
  return {
    brokers,
    version,
    pid: broker.pid,
    logFile: files.logFile,
    dataDir: files.dataDir,
    alreadyRunning: false,
    ...c.secured,
    ...(listeners ? { listeners } : {}),
    nodes: [singleNode(state, files)],
  };
}

/**
 * Stops the broker started from this data dir (SIGTERM, then SIGKILL after 30 s). Resolves to true
 * when a broker was stopped. With `wipe`, also deletes the data dir (topics, offsets, logs).
 *
 * @example
 * await stopLocalKafka({ port: 29092, wipe: true });
 */
export async function stopLocalKafka(opts: StopLocalKafkaOptions = {}): Promise<boolean> {
  const env = opts.env ?? process.env;
  const files = runFiles(dataDirFor(checkPort(opts.port ?? DEFAULT_PORT, 'port'), opts.dataDir, env));
  const cluster = await readCluster(files.dataDir);
  if (
    opts.node !== undefined &&
    (!cluster || !Number.isInteger(opts.node) || opts.node < 1 || opts.node > cluster.nodes)
  ) {
    throw invalid(
      cluster
        ? `node must be 1-${cluster.nodes} for the cluster in ${files.dataDir}, got ${opts.node}`
        : `node ${opts.node}: no cluster was started from ${files.dataDir}`,
    );
  }
  if (opts.node !== undefined && opts.wipe) throw invalid('wipe stops the whole cluster; leave out node');
  let stopped = false;
  if (cluster) {
    const layout = clusterLayout(files.dataDir, cluster.port, cluster.nodes).filter(
      (n) => opts.node === undefined || n.nodeId === opts.node,
    );
    // All at once: stopped one by one, the last nodes lose their quorum and cannot finish a
    // controlled shutdown (they wait it out until SIGKILL).
    const results = await Promise.all(layout.map((n) => stopNode(n.files)));
    stopped = results.some((r) => r);
  }
  if (opts.node === undefined && (await stopNode(files))) stopped = true;
  if (opts.wipe && existsSync(files.dataDir)) {
    const entries = await readdir(files.dataDir);
    if (entries.length > 0 && !existsSync(files.marker)) {
      throw invalid(`Refusing to wipe ${files.dataDir}: it was not created by sluice kafka start`);
    }
    await rm(files.dataDir, { recursive: true, force: true });
  }
  return stopped;
}

/** Stops the broker recorded in `files` (SIGTERM, then SIGKILL after 30 s); true if one ran. */
async function stopNode(files: RunFiles): Promise<boolean> {
  const running = await findOurBroker(files);
  if (running) {
    signalGroup(running.pid, 'SIGTERM');
    if (!(await waitForExit(running.pid, STOP_TIMEOUT_MS))) {
      signalGroup(running.pid, 'SIGKILL');
      await waitForExit(running.pid, 5_000);
    }
  }
  await removeState(files);
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
  const cluster = await readCluster(files.dataDir);
  if (cluster) {
    const layout = clusterLayout(files.dataDir, cluster.port, cluster.nodes);
    const states = await findCluster(files.dataDir, cluster);
    const live = states.filter((s) => s !== undefined);
    if (live.length > 0) {
      const brokers = layout.map((n) => n.broker);
      return {
        running: live.length === layout.length && (await brokerAnswers(brokers, STATUS_TIMEOUT_MS)),
        pid: live[0]!.pid,
        brokers,
        version: live[0]!.version,
        logFile: layout[0]!.files.logFile,
        dataDir: files.dataDir,
        nodes: layout.map((n, i) => nodeOf(n, states[i]?.pid ?? 0)),
      };
    }
  }
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
    libsDir: string;
    env: NodeJS.ProcessEnv;
    log: (msg: string) => void;
    security?: BrokerSecurity | undefined;
    /** The rendered server.properties. */
    properties: string;
    /** Used when the storage is (re)formatted. */
    clusterId: string;
  },
): Promise<void> {
  await mkdir(files.logsDir, { recursive: true });
  await writeFile(files.marker, 'Data of a local Kafka broker started by sluice kafka start.\n');
  await writeFile(files.serverProperties, c.properties);
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
    c.clusterId,
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
  // This start's lines only: a node started again appends to its log (spawnDetached).
  const whole = await readFile(files.logFile, 'utf8').catch(() => '');
  const log = whole.slice(Math.max(0, whole.lastIndexOf(START_MARK)));
  const tail = lastLines(log, LOG_TAIL_LINES) || '(the log is empty)';
  // The cause is often far above the shutdown lines of the tail (a port taken, a bad property).
  const first = firstErrors(log, 3);
  const errors = first ? `\nFirst errors in ${files.logFile}:\n${first}` : '';
  return new SluiceError(
    'SLUICE_KAFKA',
    `${what}: ${reason}${errors}\nLast lines of ${files.logFile}:\n${tail}`,
    {
      cause,
    },
  );
}

/** The first `n` ERROR or FATAL lines of a broker log, each with the line after it (the exception). */
function firstErrors(log: string, n: number): string {
  const lines = log.split('\n');
  const out: string[] = [];
  for (let i = 0; i < lines.length && out.length < 2 * n; i++) {
    if (!/\] (ERROR|FATAL) /.test(lines[i]!)) continue;
    out.push(lines[i]!);
    const next = lines[i + 1];
    if (next !== undefined && !/^\[\d{4}-/.test(next)) out.push(next);
  }
  return out.join('\n');
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

/** A cluster's layout as recorded in its root data dir. */
interface ClusterRecord {
  version: string;
  port: number;
  nodes: number;
}

interface ClusterNode {
  nodeId: number;
  port: number;
  controllerPort: number;
  broker: string;
  files: RunFiles;
}

function clusterLayout(root: string, port: number, nodes: number): ClusterNode[] {
  return Array.from({ length: nodes }, (_, i) => ({
    nodeId: i + 1,
    port: port + 2 * i,
    controllerPort: port + 2 * i + 1,
    broker: `127.0.0.1:${port + 2 * i}`,
    files: runFiles(join(root, `node-${i + 1}`)),
  }));
}

async function readCluster(root: string): Promise<ClusterRecord | undefined> {
  try {
    const r = JSON.parse(await readFile(join(root, CLUSTER_FILE), 'utf8')) as ClusterRecord;
    return Number.isInteger(r.nodes) && Number.isInteger(r.port) ? r : undefined;
  } catch {
    return undefined;
  }
}

/** The running broker of each node of the cluster recorded in `root` (undefined: not running). */
async function findCluster(root: string, c: ClusterRecord): Promise<Array<BrokerState | undefined>> {
  return Promise.all(clusterLayout(root, c.port, c.nodes).map((n) => findOurBroker(n.files)));
}

function nodeOf(n: ClusterNode, pid: number): LocalKafkaNode {
  return {
    nodeId: n.nodeId,
    broker: n.broker,
    controllerPort: n.controllerPort,
    pid,
    logFile: n.files.logFile,
  };
}

function singleNode(state: BrokerState, files: RunFiles): LocalKafkaNode {
  const broker = state.brokers[0] ?? '';
  const port = Number(broker.slice(broker.lastIndexOf(':') + 1));
  return { nodeId: 1, broker, controllerPort: port + 1, pid: state.pid, logFile: files.logFile };
}

/** Validates the extra listeners for `nodes` nodes: names, one port per node, no port used twice. */
function checkListeners(
  ls: readonly ExtraListener[] | undefined,
  nodes: number,
  taken: readonly number[],
): ExtraListener[] {
  const out: ExtraListener[] = [];
  const used = new Set(taken);
  const names = new Set<string>();
  for (const l of ls ?? []) {
    if (!LISTENER_NAME.test(l.name) || RESERVED_LISTENER_NAMES.includes(l.name) || names.has(l.name)) {
      throw invalid(
        `listeners: name ${JSON.stringify(l.name)} must be upper-case letters, digits and '_', unique, and not ${RESERVED_LISTENER_NAMES.join(', ')}`,
      );
    }
    names.add(l.name);
    const advertisedPorts = l.advertisedPorts ?? l.ports;
    if (l.ports.length !== nodes || advertisedPorts.length !== nodes) {
      throw invalid(`listeners.${l.name}: give one port (and one advertised port) per broker (${nodes})`);
    }
    for (const p of l.ports) {
      checkPort(p, `listeners.${l.name} port`);
      if (used.has(p)) throw invalid(`listeners.${l.name}: port ${p} is already used by another listener`);
      used.add(p);
    }
    for (const p of advertisedPorts) checkPort(p, `listeners.${l.name} advertised port`);
    out.push({ name: l.name, ports: [...l.ports], advertisedPorts: [...advertisedPorts] });
  }
  return out;
}

/** The extra listeners of node `index` (from 0). */
function nodeListeners(ls: readonly ExtraListener[], index: number): NodeListener[] {
  return ls.map((l) => ({
    name: l.name,
    port: l.ports[index]!,
    advertisedPort: (l.advertisedPorts ?? l.ports)[index]!,
  }));
}

function listenerAddresses(ls: readonly ExtraListener[]): Record<string, string[]> | undefined {
  if (ls.length === 0) return undefined;
  return Object.fromEntries(
    ls.map((l) => [l.name, (l.advertisedPorts ?? l.ports).map((p) => `127.0.0.1:${p}`)]),
  );
}

/**
 * Starts the nodes of a local cluster that are not running (all of them the first time), and
 * resolves once the cluster can create topics, run groups and commit transactions and every node
 * is a live broker in its metadata. One start at a time per data dir, as for a single broker.
 */
async function startCluster(
  opts: StartLocalKafkaOptions,
  count: number,
  env: NodeJS.ProcessEnv,
  log: (msg: string) => void,
): Promise<LocalKafka> {
  const port = checkPort(opts.port ?? DEFAULT_PORT, 'port');
  if (port + 2 * count - 1 > 65535)
    throw invalid(`port ${port} leaves no room for ${count} brokers (2 ports each)`);
  if (opts.controllerPort !== undefined) {
    throw invalid('controllerPort is for a single broker: node i + 1 of a cluster uses port + 2i + 1');
  }
  if (opts.security !== undefined) throw invalid('security listeners are for a single broker');
  const heapMb = opts.heapMb ?? DEFAULT_CLUSTER_HEAP_MB;
  if (!Number.isInteger(heapMb) || heapMb < 1) {
    throw invalid(`heapMb must be a positive integer, got ${heapMb}`);
  }
  const readyTimeoutMs = opts.readyTimeoutMs ?? DEFAULT_CLUSTER_READY_TIMEOUT_MS;
  const root = dataDirFor(port, opts.dataDir, env);
  const rootFiles = runFiles(root);
  const layout = clusterLayout(root, port, count);
  const listeners = checkListeners(
    opts.listeners,
    count,
    layout.flatMap((n) => [n.port, n.controllerPort]),
  );
  const brokers = layout.map((n) => n.broker);
  const stopCommand = `sluice kafka stop --port ${port}${opts.dataDir === undefined ? '' : ` --data-dir ${root}`}`;
  const recorded = await readCluster(root);
  if (recorded && (recorded.nodes !== count || recorded.port !== port)) {
    throw invalid(
      `${root} holds a cluster of ${recorded.nodes} brokers from port ${recorded.port}, not ${count} from ${port}; ` +
        `stop it with --wipe, or use another data dir`,
    );
  }
  if (await findOurBroker(rootFiles)) {
    throw invalid(`A single broker runs from ${root}; stop it first (${stopCommand})`);
  }
  const { version, libsDir } = await locateJars(opts, env, log);
  const flavour = loggingFlavour(version);
  await ensureTools(['java'], {
    probe: opts.toolProbe,
    minJavaMajor: parseKafkaVersion(version).major >= 4 ? 17 : 11,
  });
  const lock = await lockDataDir(rootFiles, readyTimeoutMs + LOCK_SLACK_MS, log);
  const spawned: Array<{ node: ClusterNode; pid: number; exited: Promise<never> }> = [];
  try {
    const running = await Promise.all(layout.map((n) => findOurBroker(n.files)));
    const runningVersion = running.find((r) => r !== undefined)?.version;
    const asked = askedVersion(opts, env);
    if (
      runningVersion !== undefined &&
      (asked ? !kafkaVersionMatches(asked.version, runningVersion) : runningVersion !== version)
    ) {
      throw new SluiceError(
        'SLUICE_KAFKA',
        `Kafka ${runningVersion} is already running from ${root}, not ${asked?.label ?? version}; stop it first with: ${stopCommand}`,
      );
    }
    const missing = layout.filter((_, i) => running[i] === undefined);
    await checkPortsFree(
      missing.flatMap((n) => [
        n.port,
        n.controllerPort,
        ...nodeListeners(listeners, n.nodeId - 1).map((l) => l.port),
      ]),
      rootFiles,
    );
    if (missing.length > 0) {
      await mkdir(root, { recursive: true });
      await writeFile(rootFiles.marker, 'Data of a local Kafka cluster started by sluice kafka start.\n');
      const record: ClusterRecord = { version, port, nodes: count };
      await writeFile(join(root, CLUSTER_FILE), `${JSON.stringify(record)}\n`);
      const idFile = join(root, CLUSTER_ID_FILE);
      const id = existsSync(idFile) ? (await readFile(idFile, 'utf8')).trim() : clusterId();
      await writeFile(idFile, `${id}\n`);
      const controllerPorts = layout.map((n) => n.controllerPort);
      for (const n of missing) {
        await prepareDataDir(n.files, {
          version,
          flavour,
          libsDir,
          env,
          log,
          clusterId: id,
          properties: renderServerProperties({
            flavour,
            port: n.port,
            controllerPort: n.controllerPort,
            kraftDir: n.files.kraftDir,
            cluster: { nodeId: n.nodeId, controllerPorts },
            listeners: nodeListeners(listeners, n.nodeId - 1),
          }),
        });
      }
      log(
        `Starting Kafka ${version} node${missing.length > 1 ? 's' : ''} ${missing.map((n) => `${n.nodeId} (${n.broker})`).join(', ')} (data ${root})`,
      );
      for (const n of missing) {
        // Appended: a node started again after a crash keeps its log up to the crash.
        const p = await spawnDetached(javaCommand(env), brokerJvmArgs(flavour, heapMb, n.files, libsDir), {
          cwd: n.files.dataDir,
          logFile: n.files.logFile,
          env,
          append: true,
        });
        spawned.push({ node: n, pid: p.pid, exited: p.exited });
        const state: BrokerState = { version, brokers: [n.broker], pid: p.pid };
        await writeFile(n.files.pidFile, `${p.pid}\n`);
        await writeFile(n.files.stateFile, `${JSON.stringify(state)}\n`);
      }
    }
    const abort = new AbortController();
    const ready = (async () => {
      await probeBroker(brokers, { timeoutMs: readyTimeoutMs, signal: abort.signal });
      // The probe passes as soon as enough brokers serve; a restarted node must be back too.
      const deadline = Date.now() + readyTimeoutMs;
      for (;;) {
        abort.signal.throwIfAborted();
        const live = await liveBrokerCount(brokers, STATUS_TIMEOUT_MS);
        if (live === count) return;
        if (Date.now() > deadline) throw new Error(`${live ?? 0} of ${count} brokers live in the metadata`);
        await sleep(250);
      }
    })();
    ready.catch(() => {});
    try {
      await Promise.race([ready, ...spawned.map((s) => s.exited)]);
    } catch (err) {
      abort.abort();
      const dead = spawned.find((s) => !isAlive(s.pid));
      for (const s of spawned) signalGroup(s.pid, 'SIGKILL');
      for (const s of spawned) {
        await waitForExit(s.pid, 5_000);
        await removeState(s.node.files);
      }
      const failed = dead?.node ?? spawned[0]?.node ?? layout[0]!;
      throw await startFailure(
        `Kafka ${version} cluster ${dead ? `node ${failed.nodeId} exited during start-up` : 'did not become ready'}`,
        failed.files,
        err,
      );
    }
    const pids = layout.map((n, i) => running[i]?.pid ?? spawned.find((s) => s.node === n)!.pid);
    log(`Kafka ${version} cluster of ${count} ready at ${brokers.join(',')}`);
    const addresses = listenerAddresses(listeners);
    return {
      brokers,
      version,
      pid: pids[0]!,
      logFile: layout[0]!.files.logFile,
      dataDir: root,
      alreadyRunning: missing.length === 0,
      ...(addresses ? { listeners: addresses } : {}),
      nodes: layout.map((n, i) => nodeOf(n, pids[i]!)),
    };
  } finally {
    lock.release();
  }
}
