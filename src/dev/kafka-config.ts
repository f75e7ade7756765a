import { join } from 'node:path';
import type { LoggingFlavour } from './kafka-jars.js';

/** Where a local broker keeps everything: all of it under one data dir, so `--wipe` is one `rm -r`. */
export interface RunFiles {
  dataDir: string;
  /** Marks a data dir as made by sluice; `stop --wipe` refuses to delete a folder without it. */
  marker: string;
  serverProperties: string;
  brokerLogConfig: string;
  /** Logging config for StorageTool: warnings to stderr, so stdout stays clean. */
  toolLogConfig: string;
  logsDir: string;
  logFile: string;
  /** KRaft metadata and topic partitions (`log.dirs`). */
  kraftDir: string;
  pidFile: string;
  /** `{ version, brokers, port, pid }` of the running broker, for status and idempotent starts. */
  stateFile: string;
  /** The Kafka version that formatted `kraftDir`. */
  formattedBy: string;
}

export function runFiles(dataDir: string): RunFiles {
  const logsDir = join(dataDir, 'logs');
  return {
    dataDir,
    marker: join(dataDir, '.sluice-local-kafka'),
    serverProperties: join(dataDir, 'server.properties'),
    brokerLogConfig: join(dataDir, 'broker-log.properties'),
    toolLogConfig: join(dataDir, 'tool-log.properties'),
    logsDir,
    logFile: join(logsDir, 'server.log'),
    kraftDir: join(dataDir, 'kraft'),
    pidFile: join(dataDir, 'broker.pid'),
    stateFile: join(dataDir, 'broker.json'),
    formattedBy: join(dataDir, 'kraft-formatted-by'),
  };
}

export interface ServerConfig {
  flavour: LoggingFlavour;
  port: number;
  controllerPort: number;
  kraftDir: string;
  /** Extra listeners for clients that authenticate or use TLS; the PLAINTEXT one stays. */
  security?: BrokerSecurity | undefined;
  /**
   * One node of a local cluster: its id and every voter's controller port (node `i + 1` at
   * `controllerPorts[i]`). Absent: a single node (id 1, one voter).
   */
  cluster?: { nodeId: number; controllerPorts: readonly number[] } | undefined;
  /** More PLAINTEXT listeners of this node (e.g. one that clients reach through a TCP proxy). */
  listeners?: readonly NodeListener[] | undefined;
}

/**
 * An extra PLAINTEXT listener of one node: bound on `port`, and advertised in metadata served on
 * it as `advertisedPort`, so that clients bootstrapped at `advertisedPort` (a proxy in front of the
 * broker) keep going through it for every broker instead of being handed the brokers' own addresses.
 */
export interface NodeListener {
  /** Upper-case listener name, e.g. `PROXIED`. */
  name: string;
  port: number;
  advertisedPort: number;
}

/** Listener names the launcher uses itself. */
export const RESERVED_LISTENER_NAMES: readonly string[] = [
  'PLAINTEXT',
  'CONTROLLER',
  'SASL_PLAINTEXT',
  'SSL',
];
export const LISTENER_NAME = /^[A-Z][A-Z0-9_]{0,31}$/;

/**
 * Replication of the internal topics (and the default of new topics) for a cluster of `nodes`:
 * factor min(3, nodes), and min.insync.replicas 2 once there are 3 copies, so one broker can be
 * down (a rolling restart, a crash) while acks=all writes and transactions go on.
 */
export function replicationFor(nodes: number): { factor: number; minIsr: number } {
  const factor = Math.min(3, nodes);
  return { factor, minIsr: factor >= 3 ? 2 : 1 };
}

/** A user of the local broker's SASL listener (PLAIN, and SCRAM-SHA-256/512 when formatted with it). */
export interface SaslUser {
  username: string;
  password: string;
}

/**
 * Listeners beside PLAINTEXT (which the broker keeps for itself, the launcher's readiness probe and
 * tools): `SASL_PLAINTEXT` with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, and `SSL` from a PKCS12
 * keystore. For tests and for trying a secured setup locally, not for production.
 */
export interface BrokerSecurity {
  sasl?: { port: number; users: SaslUser[] } | undefined;
  ssl?:
    | {
        port: number;
        /** PKCS12 keystore with the broker's key and certificate (SAN IP:127.0.0.1). */
        keystore: string;
        keystorePassword: string;
        /** PEM file of the CA that signs client certificates; with it, clients must present one. */
        clientCa?: string | undefined;
      }
    | undefined;
}

/** SASL/SCRAM names and passwords go into JAAS and StorageTool arguments unquoted: keep them plain. */
export const SAFE_CREDENTIAL = /^[A-Za-z0-9._-]{1,64}$/;

function securityLines(sec: BrokerSecurity | undefined): { listeners: string[]; lines: string[] } {
  const listeners: string[] = [];
  const lines: string[] = [];
  if (sec?.sasl) {
    listeners.push(`SASL_PLAINTEXT://127.0.0.1:${sec.sasl.port}`);
    const plainUsers = sec.sasl.users.map((u) => `user_${u.username}="${u.password}"`).join(' ');
    lines.push(
      'sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512',
      `listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required ${plainUsers};`,
      'listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;',
      'listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;',
    );
  }
  if (sec?.ssl) {
    listeners.push(`SSL://127.0.0.1:${sec.ssl.port}`);
    lines.push(
      `listener.name.ssl.ssl.keystore.location=${escapePropertyValue(sec.ssl.keystore)}`,
      `listener.name.ssl.ssl.keystore.password=${sec.ssl.keystorePassword}`,
      `listener.name.ssl.ssl.key.password=${sec.ssl.keystorePassword}`,
      'listener.name.ssl.ssl.keystore.type=PKCS12',
    );
    if (sec.ssl.clientCa) {
      lines.push(
        `listener.name.ssl.ssl.truststore.location=${escapePropertyValue(sec.ssl.clientCa)}`,
        'listener.name.ssl.ssl.truststore.type=PEM',
        'listener.name.ssl.ssl.client.auth=required',
      );
    }
  }
  return { listeners, lines };
}

/**
 * A combined broker+controller in KRaft mode with a static quorum (one voter alone; with
 * `cluster`, every node of the cluster votes), listening on 127.0.0.1 only (`localhost` may
 * resolve to ::1 while the broker advertises IPv4).
 *
 * Internal topics get 4 partitions instead of 50: the coordinators load every partition at start,
 * and on a small machine 50 partitions of `__consumer_offsets` and `__transaction_state` cost
 * seconds before the first group or transaction can run. Topics must be created explicitly, as in
 * production, so a typo in a topic name fails instead of silently creating a topic.
 */
export function renderServerProperties(c: ServerConfig): string {
  const sec = securityLines(c.security);
  const own = (c.listeners ?? []).map((l) => ({
    bind: `${l.name}://127.0.0.1:${l.port}`,
    advertised: `${l.name}://127.0.0.1:${l.advertisedPort}`,
    protocol: `${l.name}:PLAINTEXT`,
  }));
  const extra = sec.listeners.map((l) => `,${l}`).join('');
  const protocols = sec.listeners.map((l) => `,${l.slice(0, l.indexOf(':'))}:${l.slice(0, l.indexOf(':'))}`);
  const nodeId = c.cluster?.nodeId ?? 1;
  const voters = (c.cluster?.controllerPorts ?? [c.controllerPort])
    .map((p, i) => `${i + 1}@127.0.0.1:${p}`)
    .join(',');
  const { factor, minIsr } = replicationFor(c.cluster?.controllerPorts.length ?? 1);
  const lines = [
    '# Written by sluice kafka start on every start; edits are overwritten.',
    'process.roles=broker,controller',
    `node.id=${nodeId}`,
    `controller.quorum.voters=${voters}`,
    `listeners=PLAINTEXT://127.0.0.1:${c.port},CONTROLLER://127.0.0.1:${c.controllerPort}${extra}${own.map((l) => `,${l.bind}`).join('')}`,
    `advertised.listeners=PLAINTEXT://127.0.0.1:${c.port}${extra}${own.map((l) => `,${l.advertised}`).join('')}`,
    'inter.broker.listener.name=PLAINTEXT',
    'controller.listener.names=CONTROLLER',
    `listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT${protocols.join('')}${own.map((l) => `,${l.protocol}`).join('')}`,
    ...sec.lines,
    `log.dirs=${escapePropertyValue(c.kraftDir)}`,
    'num.partitions=1',
    `default.replication.factor=${factor}`,
    `min.insync.replicas=${minIsr}`,
    'auto.create.topics.enable=false',
    `offsets.topic.replication.factor=${factor}`,
    'offsets.topic.num.partitions=4',
    `transaction.state.log.replication.factor=${factor}`,
    `transaction.state.log.min.isr=${minIsr}`,
    'transaction.state.log.num.partitions=4',
    'group.initial.rebalance.delay.ms=0',
  ];
  if (c.flavour === 'log4j2') {
    lines.push(
      `share.coordinator.state.topic.replication.factor=${factor}`,
      `share.coordinator.state.topic.min.isr=${minIsr}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** Java properties treat `\` as an escape: Windows paths need doubling. */
function escapePropertyValue(value: string): string {
  return value.replace(/\\/g, '\\\\');
}

/**
 * Logging config for the broker (to stdout, which we redirect to `logs/server.log`) or for a tool
 * (warnings only, to stderr). Two loggers are quietened: the per-request logger (a line per request)
 * and the config dumps, which are ~90% of a 4.x start-up log and bury the lines that matter; the
 * effective config is `server.properties` beside the log.
 */
export function renderLogConfig(flavour: LoggingFlavour, target: 'broker' | 'tool'): string {
  const level = target === 'broker' ? 'info' : 'warn';
  if (flavour === 'log4j2') {
    return `${[
      'status=warn',
      'name=sluice-local-kafka',
      'appender.console.type=Console',
      'appender.console.name=CONSOLE',
      `appender.console.target=${target === 'broker' ? 'SYSTEM_OUT' : 'SYSTEM_ERR'}`,
      'appender.console.layout.type=PatternLayout',
      'appender.console.layout.pattern=[%d] %p %m (%c)%n',
      `rootLogger.level=${level}`,
      'rootLogger.appenderRef.console.ref=CONSOLE',
      'logger.request.name=kafka.request.logger',
      'logger.request.level=warn',
      'logger.config.name=org.apache.kafka.common.config.AbstractConfig',
      'logger.config.level=warn',
    ].join('\n')}\n`;
  }
  return `${[
    `log4j.rootLogger=${level.toUpperCase()}, console`,
    'log4j.appender.console=org.apache.log4j.ConsoleAppender',
    `log4j.appender.console.Target=${target === 'broker' ? 'System.out' : 'System.err'}`,
    'log4j.appender.console.layout=org.apache.log4j.PatternLayout',
    'log4j.appender.console.layout.ConversionPattern=[%d] %p %m (%c)%n',
    'log4j.logger.kafka.request.logger=WARN',
    'log4j.logger.org.apache.kafka.common.config.AbstractConfig=WARN',
  ].join('\n')}\n`;
}

/** The system property that points each logging backend at its config file. */
export function logConfigFlag(flavour: LoggingFlavour, file: string): string {
  return flavour === 'log4j2' ? `-Dlog4j2.configurationFile=${file}` : `-Dlog4j.configuration=file:${file}`;
}

/**
 * JVM flags as `kafka-server-start.sh` would pass them (the scripts read KAFKA_HEAP_OPTS and
 * KAFKA_JVM_PERFORMANCE_OPTS; with plain `java` we pass them ourselves). A fixed heap (-Xms = -Xmx)
 * avoids resizing pauses in benchmarks.
 */
export function brokerJvmArgs(
  flavour: LoggingFlavour,
  heapMb: number,
  files: RunFiles,
  libsDir: string,
): string[] {
  return [
    `-Xms${heapMb}m`,
    `-Xmx${heapMb}m`,
    '-server',
    '-XX:+UseG1GC',
    '-XX:MaxGCPauseMillis=20',
    '-XX:InitiatingHeapOccupancyPercent=35',
    '-XX:+ExplicitGCInvokesConcurrent',
    '-XX:MaxInlineLevel=15',
    '-Djava.awt.headless=true',
    `-Dkafka.logs.dir=${files.logsDir}`,
    logConfigFlag(flavour, files.brokerLogConfig),
    '-cp',
    join(libsDir, '*'),
    'kafka.Kafka',
    files.serverProperties,
  ];
}

/**
 * JVM flags for a short-lived tool such as StorageTool: small heap and only the fast JIT tier, which
 * saves about a second of start-up on a two-core machine.
 */
export function toolJvmArgs(
  flavour: LoggingFlavour,
  files: RunFiles,
  libsDir: string,
  main: string,
): string[] {
  return [
    '-Xmx256m',
    '-XX:TieredStopAtLevel=1',
    '-Djava.awt.headless=true',
    logConfigFlag(flavour, files.toolLogConfig),
    '-cp',
    join(libsDir, '*'),
    main,
  ];
}
