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
}

/**
 * A single combined broker+controller in KRaft mode with a static one-voter quorum, listening on
 * 127.0.0.1 only (`localhost` may resolve to ::1 while the broker advertises IPv4).
 *
 * Internal topics get 4 partitions instead of 50: the coordinators load every partition at start,
 * and on a small machine 50 partitions of `__consumer_offsets` and `__transaction_state` cost
 * seconds before the first group or transaction can run. Topics must be created explicitly, as in
 * production, so a typo in a topic name fails instead of silently creating a topic.
 */
export function renderServerProperties(c: ServerConfig): string {
  const lines = [
    '# Written by sluice kafka start on every start; edits are overwritten.',
    'process.roles=broker,controller',
    'node.id=1',
    `controller.quorum.voters=1@127.0.0.1:${c.controllerPort}`,
    `listeners=PLAINTEXT://127.0.0.1:${c.port},CONTROLLER://127.0.0.1:${c.controllerPort}`,
    `advertised.listeners=PLAINTEXT://127.0.0.1:${c.port}`,
    'inter.broker.listener.name=PLAINTEXT',
    'controller.listener.names=CONTROLLER',
    'listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT',
    `log.dirs=${escapePropertyValue(c.kraftDir)}`,
    'num.partitions=1',
    'default.replication.factor=1',
    'auto.create.topics.enable=false',
    'offsets.topic.replication.factor=1',
    'offsets.topic.num.partitions=4',
    'transaction.state.log.replication.factor=1',
    'transaction.state.log.min.isr=1',
    'transaction.state.log.num.partitions=4',
    'group.initial.rebalance.delay.ms=0',
  ];
  if (c.flavour === 'log4j2') {
    lines.push(
      'share.coordinator.state.topic.replication.factor=1',
      'share.coordinator.state.topic.min.isr=1',
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
