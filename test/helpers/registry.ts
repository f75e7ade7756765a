import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ensureTools, javaCommand, lastLines, runCommand } from '../../src/dev/java-tools.js';
import { defaultCacheDir } from '../../src/dev/kafka-jars.js';

/**
 * A real Schema Registry for the tests: Apicurio Registry, from its server package on Maven Central
 * (`io.apicurio:apicurio-registry-app:<v>:tar.gz:all`, a Quarkus app; 2.6 runs on Java 17), which
 * serves the Confluent-compatible API under `/apis/ccompat/v7` and keeps its schemas in memory.
 * Resolved with Maven into `~/.cache/sluice/apicurio-registry-<v>/` on first use (about 150 MB, a
 * few seconds from a warm Maven cache), then started on a free port per test file (~5 s).
 */
export const APICURIO_VERSION = process.env.SLUICE_TEST_APICURIO_VERSION || '2.6.13.Final';

export interface TestRegistry {
  /** Base URL of the Confluent-compatible API. */
  url: string;
  port: number;
  stop(): Promise<void>;
  /** SIGSTOP: connections open, no answer (a GC pause, a stalled VM). */
  freeze(): void;
  /** SIGCONT after {@link freeze}. */
  thaw(): void;
}

function renderPom(version: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by sluice's tests to unpack Apicurio Registry ${version}; safe to delete. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.sluice.local</groupId>
  <artifactId>apicurio-registry-${version}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <build><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId>
    <artifactId>maven-dependency-plugin</artifactId>
    <version>3.8.1</version>
    <executions><execution>
      <id>unpack</id><phase>generate-resources</phase><goals><goal>unpack</goal></goals>
      <configuration><artifactItems><artifactItem>
        <groupId>io.apicurio</groupId><artifactId>apicurio-registry-app</artifactId>
        <version>${version}</version><classifier>all</classifier><type>tar.gz</type>
        <outputDirectory>\${outDir}</outputDirectory>
      </artifactItem></artifactItems></configuration>
    </execution></executions>
  </plugin></plugins></build>
</project>
`;
}

/** The unpacked app folder, fetched with Maven once (a `.complete` marker guards a half download). */
export async function resolveApicurio(version = APICURIO_VERSION, log = (_: string) => {}): Promise<string> {
  const dir = join(defaultCacheDir(), `apicurio-registry-${version}`);
  const app = join(dir, 'app');
  if (existsSync(join(dir, '.complete'))) return app;
  await ensureTools(['java', 'mvn']).catch((e: Error) => {
    throw new Error(
      `Cannot run the tests' Schema Registry (Apicurio ${version}, Java 17 and Maven): ${e.message}`,
    );
  });
  await mkdir(dir, { recursive: true });
  const pom = join(dir, 'pom.xml');
  await writeFile(pom, renderPom(version));
  const partial = await mkdtemp(join(dir, 'app.partial-'));
  try {
    log(`Resolving Apicurio Registry ${version} with Maven into ${app} (first run only)`);
    const mvn = await runCommand('mvn', [
      '-B',
      '-q',
      '-Dstyle.color=never',
      '-f',
      pom,
      `-DoutDir=${partial}`,
      'generate-resources',
    ]);
    if (mvn.code !== 0) throw new Error(`mvn exited with ${mvn.code}:\n${lastLines(mvn.output, 15)}`);
    if (existsSync(join(dir, '.complete'))) return app;
    await rm(app, { recursive: true, force: true });
    await rename(partial, app).catch((e) => {
      if (!existsSync(app)) throw e;
    });
    await writeFile(join(dir, '.complete'), `${JSON.stringify({ version, at: new Date() })}\n`);
    return app;
  } finally {
    await rm(partial, { recursive: true, force: true });
  }
}

function runnerJar(version: string): string[] {
  // 2.x ships a Quarkus "runner" jar, 3.x the fast-jar layout (needs Java 21+).
  return version.startsWith('2.') ? [`apicurio-registry-app-${version}-runner.jar`] : ['quarkus-run.jar'];
}

/** Starts a registry on a free port and waits until its API answers. */
export async function startRegistry(opts: { timeoutMs?: number } = {}): Promise<TestRegistry> {
  const version = APICURIO_VERSION;
  const app = await resolveApicurio(version, (m) => process.stderr.write(`[registry] ${m}\n`));
  const child = spawn(
    javaCommand(),
    [
      '-Xmx256m',
      '-XX:+UseSerialGC',
      '-XX:TieredStopAtLevel=1',
      '-Dquarkus.http.host=127.0.0.1',
      '-Dquarkus.http.port=0',
      '-Dquarkus.management.host=127.0.0.1',
      '-Dquarkus.management.port=0',
      '-jar',
      ...runnerJar(version),
    ],
    { cwd: app, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const onExit = () => {
    child.kill('SIGCONT');
    child.kill('SIGKILL');
  };
  process.once('exit', onExit);
  let output = '';
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new Error(
            `Apicurio Registry did not start within ${opts.timeoutMs ?? 60_000} ms:\n${lastLines(output, 20)}`,
          ),
        ),
      opts.timeoutMs ?? 60_000,
    );
    const onData = (d: Buffer) => {
      output = (output + d.toString()).slice(-20_000);
      const m = /Listening on: http:\/\/127\.0\.0\.1:(\d+)/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`Apicurio Registry exited with ${code}:\n${lastLines(output, 20)}`));
    });
  }).catch(async (e) => {
    child.kill('SIGKILL');
    process.removeListener('exit', onExit);
    throw e;
  });
  // Keep draining its output so a chatty log never blocks it.
  child.stdout!.resume();
  child.stderr!.resume();
  const url = `http://127.0.0.1:${port}/apis/ccompat/v7`;
  for (const deadline = Date.now() + 30_000; ; ) {
    const ok = await fetch(`${url}/subjects`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) throw new Error(`Apicurio Registry on ${port} never answered /subjects`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    port,
    stop: () => {
      child.kill('SIGCONT');
      return stopChild(child).finally(() => process.removeListener('exit', onExit));
    },
    freeze: () => child.kill('SIGSTOP'),
    thaw: () => child.kill('SIGCONT'),
  };
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Registers a schema through the registry's REST API directly, as another client would. */
export async function registerDirect(
  url: string,
  subject: string,
  schema: string,
  schemaType?: 'AVRO' | 'PROTOBUF' | 'JSON',
): Promise<{ status: number; body: { id?: number; error_code?: number; message?: string } }> {
  const res = await fetch(`${url}/subjects/${encodeURIComponent(subject)}/versions`, {
    method: 'POST',
    headers: { 'content-type': 'application/vnd.schemaregistry.v1+json' },
    body: JSON.stringify(schemaType && schemaType !== 'AVRO' ? { schema, schemaType } : { schema }),
  });
  return { status: res.status, body: (await res.json()) as { id?: number } };
}

/** Sets a subject's compatibility level. */
export async function setCompatibility(url: string, subject: string, level: string): Promise<void> {
  const res = await fetch(`${url}/config/${encodeURIComponent(subject)}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/vnd.schemaregistry.v1+json' },
    body: JSON.stringify({ compatibility: level }),
  });
  if (!res.ok) throw new Error(`PUT config/${subject}: ${res.status} ${await res.text()}`);
}
