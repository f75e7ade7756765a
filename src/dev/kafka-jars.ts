import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { SluiceError } from '../errors.js';
import { ensureTools, lastLines, runCommand, type ToolProbe } from './java-tools.js';

/**
 * Versions tried, newest first, when none is asked for: the newest 4.x whose jars resolved from
 * Maven Central on our machines, then older 4.x releases in case a mirror lags behind.
 */
export const DEFAULT_KAFKA_VERSIONS = ['4.4.0', '4.3.1', '4.2.0'] as const;

/** Short names a user may type, e.g. `--version 3.9`. */
const VERSION_ALIASES: Readonly<Record<string, readonly string[]>> = {
  '3.9': ['3.9.1', '3.9.0'],
  '4': DEFAULT_KAFKA_VERSIONS,
};

/** How the broker logs: 4.x through log4j2, 3.x through reload4j (a log4j 1.2 fork). */
export type LoggingFlavour = 'log4j2' | 'reload4j';

export interface KafkaVersion {
  major: number;
  minor: number;
  patch: number;
}

/** Parses `X.Y.Z`; throws for anything else, and for versions older than 3.7 (no usable KRaft). */
export function parseKafkaVersion(version: string): KafkaVersion {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(version);
  if (!m) {
    throw new SluiceError('SLUICE_CONFIG_INVALID', `Kafka version "${version}" is not of the form X.Y.Z`);
  }
  const v = { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3]) };
  if (v.major < 3 || (v.major === 3 && v.minor < 7)) {
    throw new SluiceError(
      'SLUICE_CONFIG_INVALID',
      `Kafka ${version} is too old for sluice kafka (3.7 or newer)`,
    );
  }
  return v;
}

/**
 * Whether `version` (X.Y.Z) is the one `asked` names: the same X.Y.Z, or a release of the line that
 * a short name stands for (`3.9` is any 3.9.x, `4` any 4.x).
 */
export function kafkaVersionMatches(asked: string, version: string): boolean {
  return version === asked || version.startsWith(`${asked}.`);
}

export function loggingFlavour(version: string): LoggingFlavour {
  return parseKafkaVersion(version).major >= 4 ? 'log4j2' : 'reload4j';
}

export interface MavenDependency {
  groupId: string;
  artifactId: string;
  version: string;
}

/**
 * What the broker needs on its classpath. Since 4.0 the SLF4J→log4j2 bridge ships only in the
 * release tarball, not in the published POMs (KAFKA-18466), so we add it; Kafka is on SLF4J 1.7, hence
 * `log4j-slf4j-impl`, not `-slf4j2-impl`. The log4j2 version follows the one each release was built with.
 */
export function kafkaDependencies(version: string): MavenDependency[] {
  const v = parseKafkaVersion(version);
  const kafka = [
    { groupId: 'org.apache.kafka', artifactId: 'kafka_2.13', version },
    { groupId: 'org.apache.kafka', artifactId: 'kafka-tools', version },
  ];
  if (v.major < 4) {
    return [
      ...kafka,
      { groupId: 'org.slf4j', artifactId: 'slf4j-reload4j', version: '1.7.36' },
      { groupId: 'ch.qos.reload4j', artifactId: 'reload4j', version: '1.2.25' },
    ];
  }
  const log4j = v.major === 4 && v.minor < 2 ? '2.24.3' : '2.25.2';
  return [
    ...kafka,
    ...['log4j-slf4j-impl', 'log4j-core', 'log4j-api'].map((artifactId) => ({
      groupId: 'org.apache.logging.log4j',
      artifactId,
      version: log4j,
    })),
  ];
}

/** A throwaway POM whose only job is to let `dependency:copy-dependencies` fetch the broker's jars. */
export function renderPom(version: string): string {
  const deps = kafkaDependencies(version)
    .map(
      (d) =>
        `    <dependency>\n      <groupId>${d.groupId}</groupId>\n      <artifactId>${d.artifactId}</artifactId>\n` +
        `      <version>${d.version}</version>\n    </dependency>`,
    )
    .join('\n');
  return `<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by sluice to resolve Kafka ${version}'s jars; safe to delete. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.sluice.local</groupId>
  <artifactId>kafka-${version}-libs</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
${deps}
  </dependencies>
</project>
`;
}

/** Jars that bind SLF4J to a logging backend. More than one and SLF4J picks one at random. */
const SLF4J_BINDINGS = [
  /^log4j-slf4j2?-impl-/,
  /^slf4j-reload4j-/,
  /^slf4j-log4j12-/,
  /^logback-classic-/,
  /^slf4j-simple-/,
  /^slf4j-nop-/,
  /^slf4j-jdk14-/,
];

/** The SLF4J binding jars among `jarNames`. */
export function slf4jBindings(jarNames: readonly string[]): string[] {
  return jarNames.filter((name) => SLF4J_BINDINGS.some((re) => re.test(name)));
}

/** `~/.cache/sluice` (or `$XDG_CACHE_HOME/sluice`): jars and data of local brokers, outside any repo. */
export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'sluice');
}

export interface ResolveKafkaOptions {
  /** `X.Y.Z` or `3.9`; default `SLUICE_KAFKA_VERSION`, else the newest of {@link DEFAULT_KAFKA_VERSIONS}. */
  version?: string;
  /** Default {@link defaultCacheDir}. */
  cacheDir?: string;
  log?: (msg: string) => void;
  /** Stand-in for `java -version` / `mvn -v` (tests). */
  toolProbe?: ToolProbe;
  env?: NodeJS.ProcessEnv;
}

/**
 * Fetches the broker's jars from Maven Central into `<cacheDir>/kafka-<version>/libs`, once: later
 * calls find the `.complete` marker and return at once. Jars are copied into a temporary folder that
 * is renamed into place, so an interrupted download is never mistaken for a complete one.
 *
 * @example
 * const { version, libsDir } = await resolveKafka({ version: '3.9', log: console.error });
 */
export async function resolveKafka(
  opts: ResolveKafkaOptions = {},
): Promise<{ version: string; libsDir: string }> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? (() => {});
  const asked = opts.version ?? (env.SLUICE_KAFKA_VERSION || undefined);
  const candidates = asked === undefined ? DEFAULT_KAFKA_VERSIONS : (VERSION_ALIASES[asked] ?? [asked]);
  const cacheDir = opts.cacheDir ?? defaultCacheDir(env);
  for (const version of candidates) parseKafkaVersion(version);

  let toolsChecked = false;
  const failures: string[] = [];
  for (const version of candidates) {
    const dir = join(cacheDir, `kafka-${version}`);
    const libsDir = join(dir, 'libs');
    if (existsSync(join(dir, '.complete'))) return { version, libsDir };
    if (!toolsChecked) {
      await ensureTools(['java', 'mvn'], { probe: opts.toolProbe });
      toolsChecked = true;
    }
    log(`Resolving Kafka ${version} jars with Maven into ${libsDir} (first run only)`);
    try {
      await downloadJars(version, dir);
      return { version, libsDir };
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      failures.push(`${version}: ${reason}`);
      if (version !== candidates[candidates.length - 1])
        log(`Kafka ${version} did not resolve; trying the next version`);
    }
  }
  throw new SluiceError('SLUICE_KAFKA', `Could not resolve Kafka jars with Maven:\n${failures.join('\n')}`);
}

async function downloadJars(version: string, dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const pom = join(dir, 'pom.xml');
  await writeFile(pom, renderPom(version));
  const partial = await mkdtemp(join(dir, 'libs.partial-'));
  try {
    const mvn = await runCommand('mvn', [
      '-B',
      '-q',
      '-Dstyle.color=never',
      '-f',
      pom,
      'org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies',
      '-DincludeScope=runtime',
      `-DoutputDirectory=${partial}`,
    ]);
    if (mvn.code !== 0) throw new Error(`mvn exited with ${mvn.code}:\n${lastLines(mvn.output, 15)}`);
    const jars = (await readdir(partial)).filter((f) => f.endsWith('.jar'));
    const bindings = slf4jBindings(jars);
    if (bindings.length !== 1) {
      throw new Error(
        `expected exactly one SLF4J binding jar, found ${bindings.length}: ${bindings.join(', ')}`,
      );
    }
    const libsDir = join(dir, 'libs');
    // Another process may have finished the same download meanwhile; its copy is as good as ours.
    if (existsSync(join(dir, '.complete'))) return;
    // A libs folder without the marker is left from a crash between rename and marker.
    await rm(libsDir, { recursive: true, force: true });
    // mkdtemp makes the folder private (0700); the jars are no secret.
    await chmod(partial, 0o755);
    try {
      await rename(partial, libsDir);
    } catch (err) {
      if (!existsSync(libsDir)) throw err;
    }
    await writeFile(
      join(dir, '.complete'),
      `${JSON.stringify({ version, jars: jars.length, at: new Date() })}\n`,
    );
  } finally {
    await rm(partial, { recursive: true, force: true });
  }
}
