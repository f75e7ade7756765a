import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  ensureTools,
  javaMajor,
  LocalKafkaUnavailableError,
  type ToolName,
} from '../../../src/dev/java-tools.js';
import { renderLogConfig, renderServerProperties } from '../../../src/dev/kafka-config.js';
import {
  defaultCacheDir,
  kafkaDependencies,
  kafkaVersionMatches,
  parseKafkaVersion,
  renderPom,
  resolveKafka,
  slf4jBindings,
} from '../../../src/dev/kafka-jars.js';
import {
  clusterId,
  externalBrokers,
  localKafkaStatus,
  startLocalKafka,
  stopLocalKafka,
} from '../../../src/dev/local-kafka.js';
import { freePort } from '../../helpers/ports.js';

function properties(text: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    map.set(line.slice(0, eq), line.slice(eq + 1));
  }
  return map;
}

async function tempDir(t: { after: (fn: () => Promise<void>) => void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-local-kafka-unit-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A tool probe that pretends only `present` are installed and records what was asked. */
function fakeTools(present: ToolName[]) {
  const asked: ToolName[] = [];
  const probe = async (tool: ToolName) => {
    asked.push(tool);
    if (!present.includes(tool)) return undefined;
    return tool === 'java' ? 'openjdk version "17.0.15" 2025-04-15' : 'Apache Maven 3.8.7';
  };
  return { asked, probe };
}

async function listen(port = 0): Promise<Server & { port: number }> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(port, '127.0.0.1', done));
  const address = server.address();
  return Object.assign(server, { port: typeof address === 'object' && address ? address.port : 0 });
}

test('server properties should describe one combined KRaft node on 127.0.0.1 for Kafka 4.x', () => {
  const p = properties(
    renderServerProperties({ flavour: 'log4j2', port: 29092, controllerPort: 29093, kraftDir: '/d/kraft' }),
  );
  assert.equal(p.get('process.roles'), 'broker,controller');
  assert.equal(p.get('controller.quorum.voters'), '1@127.0.0.1:29093');
  assert.equal(p.get('listeners'), 'PLAINTEXT://127.0.0.1:29092,CONTROLLER://127.0.0.1:29093');
  assert.equal(p.get('advertised.listeners'), 'PLAINTEXT://127.0.0.1:29092');
  assert.equal(p.get('log.dirs'), '/d/kraft');
  assert.equal(p.get('offsets.topic.replication.factor'), '1');
  assert.equal(p.get('transaction.state.log.replication.factor'), '1');
  assert.equal(p.get('transaction.state.log.min.isr'), '1');
  assert.equal(p.get('group.initial.rebalance.delay.ms'), '0');
  assert.equal(p.get('offsets.topic.num.partitions'), '4');
  assert.equal(p.get('transaction.state.log.num.partitions'), '4');
  assert.equal(p.get('auto.create.topics.enable'), 'false');
  assert.equal(p.get('share.coordinator.state.topic.replication.factor'), '1');
  assert.equal(p.get('share.coordinator.state.topic.min.isr'), '1');
  assert.equal(p.has('controller.quorum.bootstrap.servers'), false, 'static quorum only');
});

test('server properties should leave out the share coordinator for Kafka 3.9', () => {
  const p = properties(
    renderServerProperties({ flavour: 'reload4j', port: 29192, controllerPort: 29193, kraftDir: '/d/kraft' }),
  );
  assert.equal(p.get('listeners'), 'PLAINTEXT://127.0.0.1:29192,CONTROLLER://127.0.0.1:29193');
  assert.equal(p.get('transaction.state.log.min.isr'), '1');
  assert.equal([...p.keys()].filter((k) => k.startsWith('share.')).length, 0);
});

test('server properties should escape backslashes in the data path', () => {
  const text = renderServerProperties({ flavour: 'log4j2', port: 1, controllerPort: 2, kraftDir: 'C:\\k' });
  assert.match(text, /^log\.dirs=C:\\\\k$/m);
});

test('log config should send broker logs to stdout and tool logs to stderr', () => {
  assert.match(renderLogConfig('log4j2', 'broker'), /appender\.console\.target=SYSTEM_OUT/);
  assert.match(renderLogConfig('log4j2', 'tool'), /appender\.console\.target=SYSTEM_ERR/);
  assert.match(renderLogConfig('log4j2', 'tool'), /rootLogger\.level=warn/);
  assert.match(renderLogConfig('reload4j', 'broker'), /log4j\.appender\.console\.Target=System\.out/);
  assert.match(renderLogConfig('reload4j', 'tool'), /log4j\.rootLogger=WARN, console/);
});

test('POM should add the log4j2 bridge that the 4.x POMs leave out', () => {
  const ids = (v: string) => kafkaDependencies(v).map((d) => `${d.groupId}:${d.artifactId}:${d.version}`);
  assert.deepEqual(ids('4.4.0'), [
    'org.apache.kafka:kafka_2.13:4.4.0',
    'org.apache.kafka:kafka-tools:4.4.0',
    'org.apache.logging.log4j:log4j-slf4j-impl:2.25.2',
    'org.apache.logging.log4j:log4j-core:2.25.2',
    'org.apache.logging.log4j:log4j-api:2.25.2',
  ]);
  assert.ok(ids('4.1.0').includes('org.apache.logging.log4j:log4j-slf4j-impl:2.24.3'));
  assert.ok(ids('4.0.0').includes('org.apache.logging.log4j:log4j-core:2.24.3'));
  assert.ok(ids('4.2.0').includes('org.apache.logging.log4j:log4j-api:2.25.2'));
});

test('POM should bind SLF4J to reload4j for Kafka 3.9', () => {
  const pom = renderPom('3.9.1');
  assert.match(pom, /<artifactId>kafka_2\.13<\/artifactId>\s*<version>3\.9\.1<\/version>/);
  assert.match(pom, /<artifactId>slf4j-reload4j<\/artifactId>\s*<version>1\.7\.36<\/version>/);
  assert.match(pom, /<artifactId>reload4j<\/artifactId>\s*<version>1\.2\.25<\/version>/);
  assert.doesNotMatch(pom, /log4j-slf4j/);
});

test('Kafka versions should be X.Y.Z and 3.7 or newer', () => {
  assert.deepEqual(parseKafkaVersion('4.4.0'), { major: 4, minor: 4, patch: 0 });
  for (const bad of ['4.4', '4.4.0-rc1', '4.4.0</version>', '', 'latest']) {
    assert.throws(() => parseKafkaVersion(bad), /not of the form X\.Y\.Z/, bad);
  }
  assert.throws(() => parseKafkaVersion('2.8.2'), /too old/);
  assert.throws(() => parseKafkaVersion('3.6.0'), /too old/);
});

test('a running version should match the X.Y.Z, X.Y or X asked for, and nothing else', () => {
  for (const asked of ['4.4.0', '4.4', '4']) assert.equal(kafkaVersionMatches(asked, '4.4.0'), true, asked);
  for (const asked of ['3.9', '4.3.1', '4.4.1', '4.40', '44', '4.4.', '']) {
    assert.equal(kafkaVersionMatches(asked, '4.4.0'), false, asked);
  }
  assert.equal(kafkaVersionMatches('3.9', '3.9.1'), true);
});

test('SLF4J binding check should find exactly the binding jars', () => {
  const jars = [
    'kafka_2.13-4.4.0.jar',
    'slf4j-api-1.7.36.jar',
    'log4j-slf4j-impl-2.25.2.jar',
    'log4j-core-2.25.2.jar',
    'log4j-api-2.25.2.jar',
  ];
  assert.deepEqual(slf4jBindings(jars), ['log4j-slf4j-impl-2.25.2.jar']);
  assert.deepEqual(slf4jBindings(['slf4j-reload4j-1.7.36.jar', 'reload4j-1.2.25.jar']), [
    'slf4j-reload4j-1.7.36.jar',
  ]);
  assert.equal(slf4jBindings([...jars, 'logback-classic-1.5.6.jar']).length, 2);
});

test('missing java should fail with one sentence naming the three ways out', async () => {
  const tools = fakeTools(['mvn']);
  const err = await ensureTools(['java', 'mvn'], { probe: tools.probe }).then(
    () => assert.fail('expected a rejection'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof LocalKafkaUnavailableError);
  assert.equal(err.code, 'SLUICE_LOCAL_KAFKA_UNAVAILABLE');
  assert.equal(err.retriable, false);
  const msg = err.message;
  assert.match(msg, /because java is not installed/);
  for (const way of [
    'KAFKA_BROKERS',
    'KAFKA_HOME',
    'install Java 17 and Maven',
    'docker/docker-compose.yml',
  ]) {
    assert.ok(msg.includes(way), `message names ${way}: ${msg}`);
  }
  assert.doesNotMatch(msg, /\n/);
  assert.doesNotMatch(msg, /[.!?]\s/, 'a single sentence');
  assert.match(msg, /\.\)?$/);
});

test('missing java and maven should be named together', async () => {
  await assert.rejects(
    ensureTools(['java', 'mvn'], { probe: fakeTools([]).probe }),
    /java and mvn are not installed/,
  );
});

test('a java older than Kafka needs should be refused with the same ways out', async () => {
  const probe = async () => 'openjdk version "11.0.2" 2019-01-15';
  await assert.rejects(
    ensureTools(['java'], { probe, minJavaMajor: 17 }),
    (e: unknown) => e instanceof LocalKafkaUnavailableError && /Java 17 or newer/.test(e.message),
  );
});

test('java version banners should be read old and new style', () => {
  assert.equal(javaMajor('openjdk version "17.0.15" 2025-04-15'), 17);
  assert.equal(javaMajor('java version "1.8.0_402"'), 8);
  assert.equal(javaMajor('openjdk version "21" 2023-09-19'), 21);
  assert.equal(javaMajor('nonsense'), undefined);
});

test('resolveKafka should reuse complete jars without asking for java or maven', async (t) => {
  const cacheDir = await tempDir(t);
  await mkdir(join(cacheDir, 'kafka-3.9.1', 'libs'), { recursive: true });
  await writeFile(join(cacheDir, 'kafka-3.9.1', '.complete'), '{}\n');
  const tools = fakeTools([]);
  const got = await resolveKafka({ version: '3.9', cacheDir, toolProbe: tools.probe, env: {} });
  assert.deepEqual(got, { version: '3.9.1', libsDir: join(cacheDir, 'kafka-3.9.1', 'libs') });
  assert.deepEqual(tools.asked, []);
});

test('resolveKafka should not trust a download without its completion marker', async (t) => {
  const cacheDir = await tempDir(t);
  await mkdir(join(cacheDir, 'kafka-4.4.0', 'libs'), { recursive: true });
  await assert.rejects(
    resolveKafka({ cacheDir, toolProbe: fakeTools(['java']).probe, env: {} }),
    (e: unknown) => e instanceof LocalKafkaUnavailableError && /mvn is not installed/.test(e.message),
  );
});

test('resolveKafka should take its version from SLUICE_KAFKA_VERSION', async (t) => {
  const cacheDir = await tempDir(t);
  await mkdir(join(cacheDir, 'kafka-3.9.0'), { recursive: true });
  await writeFile(join(cacheDir, 'kafka-3.9.0', '.complete'), '{}\n');
  const got = await resolveKafka({ cacheDir, env: { SLUICE_KAFKA_VERSION: '3.9.0' } });
  assert.equal(got.version, '3.9.0');
});

test('startLocalKafka should start nothing when KAFKA_BROKERS is set', async () => {
  const probe = async (): Promise<string | undefined> => assert.fail('no tool should be looked up');
  const kafka = await startLocalKafka({
    env: { KAFKA_BROKERS: ' 10.0.0.1:9092, 10.0.0.2:9092 ' },
    toolProbe: probe,
  });
  assert.deepEqual(kafka.brokers, ['10.0.0.1:9092', '10.0.0.2:9092']);
  assert.equal(kafka.alreadyRunning, true);
  assert.equal(kafka.pid, 0);
  assert.deepEqual(externalBrokers({ KAFKA_BROKERS: ' , ' }), undefined);
});

test('startLocalKafka with KAFKA_HOME should need java but not maven', async (t) => {
  const home = await tempDir(t);
  await mkdir(join(home, 'libs'));
  await writeFile(join(home, 'libs', 'kafka_2.13-4.4.0.jar'), '');
  const tools = fakeTools(['mvn']);
  await assert.rejects(
    startLocalKafka({
      port: await freePort(),
      dataDir: join(home, 'data'),
      env: { KAFKA_HOME: home },
      toolProbe: tools.probe,
    }),
    LocalKafkaUnavailableError,
  );
  assert.deepEqual(tools.asked, ['java']);
});

test('startLocalKafka should refuse a port another process listens on', async (t) => {
  const server = await listen();
  t.after(() => new Promise<void>((done) => server.close(() => done())));
  const dataDir = join(await tempDir(t), 'data');
  await assert.rejects(
    startLocalKafka({ port: server.port, controllerPort: await freePort(), dataDir, env: {} }),
    new RegExp(`port ${server.port} on 127\\.0\\.0\\.1 is in use`),
  );
  assert.equal(existsSync(dataDir), false, 'nothing written before the port check');
});

test('startLocalKafka should reject bad ports and heap sizes before doing anything', async () => {
  await assert.rejects(startLocalKafka({ port: 70000, env: {} }), /port must be 1-65535/);
  await assert.rejects(startLocalKafka({ port: 29500, controllerPort: 29500, env: {} }), /must differ/);
  await assert.rejects(startLocalKafka({ port: 29500, heapMb: 0.5, env: {} }), /heapMb/);
});

test('stop and status should report nothing running for an empty data dir', async (t) => {
  const dataDir = await tempDir(t);
  assert.equal(await stopLocalKafka({ dataDir, env: {} }), false);
  assert.deepEqual(await localKafkaStatus({ dataDir, env: {} }), { running: false, dataDir });
});

test('stop should ignore a stale pid file', async (t) => {
  const dataDir = await tempDir(t);
  // A pid of ours that is no broker: the check on its command line must reject it.
  await writeFile(join(dataDir, 'broker.pid'), `${process.pid}\n`);
  await writeFile(join(dataDir, 'broker.json'), JSON.stringify({ version: '4.4.0', brokers: [], pid: 0 }));
  assert.equal((await localKafkaStatus({ dataDir, env: {} })).running, false);
  assert.equal(await stopLocalKafka({ dataDir, env: {} }), false);
  assert.equal(existsSync(join(dataDir, 'broker.pid')), false);
});

test('stop --wipe should refuse to delete a folder sluice did not create', async (t) => {
  const dataDir = await tempDir(t);
  await writeFile(join(dataDir, 'precious.txt'), 'keep me');
  await assert.rejects(stopLocalKafka({ dataDir, wipe: true, env: {} }), /Refusing to wipe/);
  assert.equal(existsSync(join(dataDir, 'precious.txt')), true);
});

test('cluster ids should look like the ones kafka-storage random-uuid prints', () => {
  for (let i = 0; i < 200; i++) {
    const id = clusterId();
    assert.match(id, /^[A-Za-z0-9_][A-Za-z0-9_-]{21}$/);
    const bytes = Buffer.from(id, 'base64url');
    assert.equal(bytes.length, 16);
    assert.equal(bytes[6]! >> 4, 4, 'version 4');
  }
});

test('the cache should live under XDG_CACHE_HOME when set, else ~/.cache', () => {
  assert.equal(defaultCacheDir({ XDG_CACHE_HOME: '/x' }), join('/x', 'sluice'));
  assert.match(defaultCacheDir({}), /[/\\]\.cache[/\\]sluice$/);
});
