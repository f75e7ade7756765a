/**
 * No container engine runs on the test machines, so docker/ is checked statically: the
 * Dockerfile, docker-compose.yml, prometheus.yml and the Kubernetes manifests are parsed, and
 * their ports, volumes, environment and probe paths must agree with the config schema (every
 * SLUICE_* variable goes through loadConfig), the HTTP server (the probe paths are asked of a
 * real ops server) and each other. `docker compose config` runs too when a Compose CLI exists.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { loadConfig } from '../../src/config/load.js';
import type { SluiceConfig } from '../../src/config/schema.js';
import { startOpsServer } from '../../src/ops/http-server.js';
import { createLogger } from '../../src/ops/logger.js';

// Compiled to dist/test/unit/, so the repository root is three folders up.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const DOCKER = join(ROOT, 'docker');
const read = (...p: string[]) => readFileSync(join(ROOT, ...p), 'utf8');

// ---------------------------------------------------------------------------------------------
// Dockerfile

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  name: string | undefined;
  from: string;
  ins: Instruction[];
}

/** Instructions by stage; line continuations joined, comments dropped. */
function parseDockerfile(text: string): Stage[] {
  const logical: string[] = [];
  let cur = '';
  for (const raw of text.split('\n')) {
    const line = raw.trimEnd();
    if (cur === '' && (line.trim() === '' || line.trim().startsWith('#'))) continue;
    if (cur !== '' && line.trim().startsWith('#')) continue;
    if (line.endsWith('\\')) {
      cur += `${line.slice(0, -1)} `;
      continue;
    }
    logical.push((cur + line).trim());
    cur = '';
  }
  const stages: Stage[] = [];
  for (const l of logical) {
    const m = /^(\w+)\s+(.*)$/s.exec(l);
    assert.ok(m, `cannot parse Dockerfile line: ${l}`);
    const op = m[1]!.toUpperCase();
    const args = m[2]!.trim();
    if (op === 'FROM') {
      const f = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args)!;
      stages.push({ from: f[1]!, name: f[2], ins: [] });
    } else if (stages.length > 0) stages[stages.length - 1]!.ins.push({ op, args });
  }
  return stages;
}

function envOf(stage: Stage): Record<string, string> {
  const env: Record<string, string> = {};
  for (const i of stage.ins.filter((x) => x.op === 'ENV')) {
    for (const [, k, v] of i.args.matchAll(/(\w+)=("[^"]*"|\S+)/g)) env[k!] = v!.replace(/^"|"$/g, '');
  }
  return env;
}

function jsonOrWords(args: string): string[] {
  return args.startsWith('[') ? (JSON.parse(args) as string[]) : args.split(/\s+/);
}

function dockerignore(): Array<(p: string) => boolean> {
  return read('.dockerignore')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((pat) => {
      const re = new RegExp(`^${pat.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}(/.*)?$`);
      return (p: string) => re.test(p) || re.test(p.split('/').pop()!);
    });
}

/** SLUICE_* variables only (others, like NODE_ENV, are not config). */
function sluiceEnv(env: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env)
      .filter(([k]) => k.startsWith('SLUICE_'))
      .map(([k, v]) => [k, String(v)]),
  );
}

/** loadConfig with exactly this environment: unknown names and bad values throw. */
function configFrom(env: Record<string, string>, where: string): Readonly<SluiceConfig> {
  try {
    return loadConfig({ env });
  } catch (e) {
    assert.fail(`${where}: ${(e as Error).message}`);
  }
}

const dockerfile = parseDockerfile(read('docker/Dockerfile'));
const runtime = dockerfile[dockerfile.length - 1]!;
const imageEnv = envOf(runtime);
const imageConfig = configFrom(sluiceEnv(imageEnv), 'Dockerfile ENV');

test('Dockerfile should build in one stage and run as a non-root user in another', () => {
  assert.ok(dockerfile.length >= 2, 'multi-stage');
  const build = dockerfile.find((s) => s.name === 'build');
  assert.ok(build, 'a stage named build');
  const runs = build.ins.filter((i) => i.op === 'RUN').map((i) => i.args);
  assert.ok(
    runs.some((r) => /\bnpm ci\b/.test(r)),
    'the build stage installs with npm ci',
  );
  assert.ok(
    runs.some((r) => /npm run build|\btsc\b/.test(r)),
    'the build stage compiles',
  );
  assert.ok(
    runs.some((r) => /npm prune --omit=dev/.test(r)),
    'dev dependencies stay out of the image',
  );
  const copiesFromBuild = runtime.ins.filter((i) => i.op === 'COPY' && /--from=build\b/.test(i.args));
  assert.ok(
    copiesFromBuild.some((i) => /\/app\/dist/.test(i.args)),
    'the runtime stage takes dist/ from the build stage',
  );
  const user = runtime.ins.filter((i) => i.op === 'USER').pop()?.args;
  assert.ok(user, 'the runtime stage sets USER');
  assert.ok(!/^(root|0)(:|$)/.test(user), `USER ${user} is root`);
  const run = runtime.ins.find((i) => i.op === 'RUN' && /useradd/.test(i.args))!.args;
  assert.match(run, /--uid 10001\b/, 'a fixed uid, the one the Kubernetes manifest runs as');
});

test('Dockerfile should build on Node 24, a Node line that CI tests', () => {
  const text = read('docker/Dockerfile');
  const image = /^ARG NODE_IMAGE=(\S+)$/m.exec(text)?.[1];
  assert.ok(image, 'ARG NODE_IMAGE=<image> before the first FROM');
  assert.ok(
    dockerfile.every((s) => s.from === `\${NODE_IMAGE}`),
    'every stage is FROM the NODE_IMAGE argument',
  );
  const major = /^node:(\d+)-/.exec(image)?.[1];
  assert.equal(major, '24', `the image is ${image}`);
  const tested = /^\s*\[ \$\{#versions\[@\]\} -gt 0 \] \|\| versions=\(([\d ]+)\)$/m.exec(
    read('scripts/other-nodes.sh'),
  )?.[1];
  assert.ok(tested?.split(' ').includes(major), `scripts/other-nodes.sh tests Node ${tested}, not ${major}`);
  const engines: string = JSON.parse(read('package.json')).engines.node;
  assert.match(
    engines,
    new RegExp(`>=\\s*${major}|\\^${major}\\.`),
    `engines.node ${engines} admits ${major}`,
  );
});

test('Dockerfile should declare the state dir as a volume and expose and health-check the HTTP port', () => {
  assert.equal(imageConfig.http.host, '0.0.0.0', 'a container must listen beyond loopback');
  const volumes = runtime.ins.filter((i) => i.op === 'VOLUME').flatMap((i) => jsonOrWords(i.args));
  assert.deepEqual(volumes, [imageConfig.state.dir], 'VOLUME is SLUICE_STATE_DIR');
  const expose = runtime.ins.filter((i) => i.op === 'EXPOSE').flatMap((i) => i.args.split(/\s+/));
  assert.deepEqual(expose, [String(imageConfig.http.port)], 'EXPOSE is SLUICE_HTTP_PORT');
  const hc = runtime.ins.find((i) => i.op === 'HEALTHCHECK');
  assert.ok(hc, 'HEALTHCHECK');
  assert.match(hc.args, /\/healthz/);
  const fallback = /SLUICE_HTTP_PORT\s*\|\|\s*(\d+)/.exec(hc.args);
  assert.ok(fallback, 'the healthcheck follows SLUICE_HTTP_PORT');
  assert.equal(Number(fallback[1]), imageConfig.http.port);
  // The state dir is created and owned by the user before VOLUME, so new volumes are writable.
  const chown = runtime.ins.find((i) => i.op === 'RUN' && /chown/.test(i.args))?.args ?? '';
  assert.ok(chown.includes(imageConfig.state.dir), 'the state dir belongs to the worker user');
});

test('Dockerfile should copy only files that exist and that .dockerignore lets through, and run a job that exists', () => {
  const ignored = dockerignore();
  for (const s of dockerfile) {
    for (const i of s.ins.filter((x) => x.op === 'COPY' && !x.args.includes('--from='))) {
      const parts = i.args.split(/\s+/).filter((p) => !p.startsWith('--'));
      for (const src of parts.slice(0, -1)) {
        assert.ok(existsSync(join(ROOT, src)), `COPY ${src}: no such file in the repository`);
        assert.ok(!ignored.some((f) => f(src)), `COPY ${src}: excluded by .dockerignore`);
      }
    }
  }
  const cmd = jsonOrWords(runtime.ins.find((i) => i.op === 'CMD')!.args);
  assert.equal(cmd[0], 'run');
  assertJobExists(cmd[1]!, 'Dockerfile CMD');
  // Exec form, node itself: SIGTERM from `docker stop` must reach the worker (no npx, npm or sh).
  const entryArgs = runtime.ins.find((i) => i.op === 'ENTRYPOINT')!.args;
  assert.ok(entryArgs.startsWith('['), 'ENTRYPOINT in exec form');
  assert.deepEqual(jsonOrWords(entryArgs), ['node', 'bin/sluice.js']);
  assert.ok(runtime.ins.find((i) => i.op === 'CMD')!.args.startsWith('['), 'CMD in exec form');
  assert.ok(existsSync(join(ROOT, 'bin/sluice.js')));
});

/** dist/examples/x.js is built from examples/x.ts (and copied into the image with dist/). */
function assertJobExists(path: string, where: string): void {
  const m = /^dist\/(examples\/[\w-]+)\.js$/.exec(path);
  assert.ok(m, `${where}: ${path} is not a compiled example`);
  assert.ok(existsSync(join(ROOT, `${m[1]}.ts`)), `${where}: ${m[1]}.ts does not exist`);
}

// ---------------------------------------------------------------------------------------------
// docker-compose.yml and prometheus.yml

const compose = parseYaml(read('docker/docker-compose.yml'), { merge: true }) as any;
const services: Record<string, any> = compose.services;
const envMap = (e: unknown): Record<string, string> =>
  Array.isArray(e)
    ? Object.fromEntries(e.map((kv: string) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]))
    : Object.fromEntries(
        Object.entries((e as Record<string, unknown>) ?? {}).map(([k, v]) => [k, String(v)]),
      );
const containerPort = (p: string | { target: number }) =>
  typeof p === 'string' ? Number(p.split(':').pop()!.split('/')[0]) : p.target;
const workers = Object.entries(services).filter(
  ([, s]) => Array.isArray(s.command) && s.command[0] === 'run',
);

test('docker-compose.yml should run Kafka in KRaft mode and create the job topics', () => {
  const kafka = services.kafka;
  assert.match(kafka.image, /^apache\/kafka:/);
  const env = envMap(kafka.environment);
  assert.deepEqual(env.KAFKA_PROCESS_ROLES!.split(',').sort(), ['broker', 'controller'], 'KRaft');
  assert.ok(!Object.keys(services).some((s) => /zookeeper/i.test(s)), 'no ZooKeeper');
  assert.match(env.KAFKA_ADVERTISED_LISTENERS!, /PLAINTEXT:\/\/kafka:9092/);
  assert.equal(env.KAFKA_TRANSACTION_STATE_LOG_MIN_ISR, '1', 'transactions work on one broker');
  assert.ok(kafka.healthcheck, 'workers wait for a healthy broker');
  const init = services['kafka-init'].command.join(' ');
  for (const topic of ['clicks', 'page-views']) assert.match(init, new RegExp(`--topic ${topic}\\b`));
});

test('docker-compose.yml should run 3 workers whose env, ports and volumes agree with the config schema', () => {
  assert.equal(workers.length, 3, `workers: ${workers.map(([n]) => n).join(', ')}`);
  const hostPorts = new Set<string>();
  const volumes = new Set<string>();
  for (const [name, s] of workers) {
    assert.equal(s.build.dockerfile, 'docker/Dockerfile', name);
    assert.equal(resolve(DOCKER, s.build.context), resolve(ROOT), `${name}: build context is the repo`);
    assertJobExists(s.command[1], name);
    const env = envMap(s.environment);
    const unknown = Object.keys(env).filter((k) => !k.startsWith('SLUICE_'));
    assert.deepEqual(unknown, [], `${name}: only SLUICE_* settings`);
    // Over the image's ENV, as the container sees it.
    const cfg = configFrom({ ...sluiceEnv(imageEnv), ...env }, `${name} environment`);
    assert.deepEqual(cfg.kafka.brokers, ['kafka:9092'], `${name}: brokers`);
    assert.equal(cfg.http.host, '0.0.0.0', `${name}: listens beyond loopback`);
    assert.equal(s.hostname, name, `${name}: advertised to peers as http://${name}:port (its service name)`);
    const ports = (s.ports as string[]).map(String);
    assert.equal(ports.length, 1, `${name}: one port`);
    assert.equal(containerPort(ports[0]!), cfg.http.port, `${name}: published port is SLUICE_HTTP_PORT`);
    hostPorts.add(ports[0]!.split(':')[0]!);
    const [vol, target] = (s.volumes[0] as string).split(':');
    assert.equal(target, cfg.state.dir, `${name}: the volume holds SLUICE_STATE_DIR`);
    assert.ok(vol! in compose.volumes, `${name}: ${vol} is a declared named volume`);
    volumes.add(vol!);
    assert.equal(s.depends_on['kafka-init'].condition, 'service_completed_successfully');
    assert.ok(/^\d+s$/.test(s.stop_grace_period) && Number.parseInt(s.stop_grace_period, 10) > 30);
  }
  assert.equal(hostPorts.size, 3, 'distinct host ports');
  assert.equal(volumes.size, 3, 'a state volume per worker (folder locks would serialize a shared one)');
});

test('docker-compose.yml should run a load generator on the job input without the worker healthcheck', () => {
  const gen = services['load-generator'];
  assert.deepEqual(gen.entrypoint, ['node', 'dist/examples/load-generator.js']);
  assert.ok(existsSync(join(ROOT, 'examples/load-generator.ts')));
  assert.equal(gen.healthcheck?.disable, true, 'it serves no /healthz');
  const args: string[] = gen.command;
  assert.equal(args[args.indexOf('--topic') + 1], 'clicks');
  assert.equal(args[args.indexOf('--brokers') + 1], 'kafka:9092');
  assert.ok(Number(args[args.indexOf('--rate') + 1]) > 0);
});

test('prometheus.yml should scrape exactly the compose workers on their HTTP port', () => {
  const prom = services.prometheus;
  const mount = (prom.volumes as string[]).find((v) => v.endsWith(':/etc/prometheus/prometheus.yml:ro'));
  assert.ok(mount, 'prometheus.yml mounted');
  const file = resolve(DOCKER, mount.split(':')[0]!);
  assert.ok(existsSync(file));
  const cfg = parseYaml(readFileSync(file, 'utf8'));
  const targets: string[] = cfg.scrape_configs.flatMap((s: any) =>
    s.static_configs.flatMap((c: any) => c.targets),
  );
  const expected = workers.map(([name, s]) => {
    const port = configFrom({ ...sluiceEnv(imageEnv), ...envMap(s.environment) }, name).http.port;
    return `${name}:${port}`;
  });
  assert.deepEqual(targets.sort(), expected.sort());
  assert.ok(cfg.scrape_configs.every((s: any) => (s.metrics_path ?? '/metrics') === '/metrics'));
});

test('promtool should accept docker/prometheus.yml (when the prometheus package is installed)', (t) => {
  const version = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  if (version.error || version.status !== 0) return t.skip('no promtool on this machine');
  const r = spawnSync('promtool', ['check', 'config', join(DOCKER, 'prometheus.yml')], { encoding: 'utf8' });
  assert.equal(r.status, 0, `promtool check config:\n${r.stdout}${r.stderr}`);
});

test('docker-compose.yml should provision Grafana from grafana/ with the Prometheus service as data source', () => {
  const g = services.grafana;
  const mounts = new Map(
    (g.volumes as string[])
      .filter((v) => v.startsWith('.'))
      .map((v) => [v.split(':')[1]!, resolve(DOCKER, v.split(':')[0]!)]),
  );
  assert.equal(mounts.get('/etc/grafana/provisioning'), join(ROOT, 'grafana/provisioning'));
  const provider = parseYaml(read('grafana/provisioning/dashboards/sluice.yml'));
  const path: string = provider.providers[0].options.path;
  assert.equal(
    mounts.get(path),
    join(ROOT, 'grafana/dashboards'),
    'the provider reads the mounted dashboards',
  );
  assert.ok(existsSync(join(ROOT, 'grafana/dashboards/sluice.json')));
  const ds = parseYaml(read('grafana/provisioning/datasources/prometheus.yml')).datasources[0];
  const url = new URL(ds.url);
  assert.ok(url.hostname in services, `data source host ${url.hostname} is a compose service`);
  assert.ok(
    (services[url.hostname].ports as string[]).some((p) => containerPort(p) === Number(url.port)),
    'data source port is the Prometheus port',
  );
  // The dashboard's panels name the data source by the variable whose default is this uid.
  const dash = JSON.parse(read('grafana/dashboards/sluice.json'));
  const dsVar = dash.templating.list.find((v: any) => v.type === 'datasource');
  assert.equal(dsVar.current.value, ds.uid);
});

test('docker compose config should accept the compose file (when a Compose CLI is installed)', (t) => {
  const file = join(DOCKER, 'docker-compose.yml');
  const candidates: Array<[string, string[]]> = [
    ['docker', ['compose', '-f', file, 'config', '--quiet']],
    ['docker-compose', ['-f', file, 'config', '--quiet']],
  ];
  for (const [bin, args] of candidates) {
    const version = spawnSync(bin, bin === 'docker' ? ['compose', 'version'] : ['version'], {
      encoding: 'utf8',
    });
    if (version.error || version.status !== 0) continue;
    const r = spawnSync(bin, args, { encoding: 'utf8' });
    assert.equal(r.status, 0, `${bin} ${args.join(' ')}:\n${r.stderr}`);
    t.diagnostic(`${bin} config accepted the file (${version.stdout.trim().split('\n')[0]})`);
    return;
  }
  t.skip('no Compose CLI (docker compose or docker-compose) on this machine');
});

// ---------------------------------------------------------------------------------------------
// Kubernetes

const k8s = ['service.yaml', 'statefulset.yaml', 'pdb.yaml'].flatMap((f) =>
  parseAllDocuments(read('docker/k8s', f)).map((d) => d.toJS()),
);
const sts = k8s.find((d) => d.kind === 'StatefulSet');
const container = sts.spec.template.spec.containers[0];
/** Downward-API variables the StatefulSet defines for its SLUICE_* values to reference. */
const K8S_HELPER_ENV = new Set(['POD_NAME']);
const k8sEnv: Record<string, string> = Object.fromEntries(
  container.env
    .filter((e: { name: string }) => !K8S_HELPER_ENV.has(e.name))
    .map((e: { name: string; value: unknown }) => [e.name, e.value]),
);

test('k8s manifests should list every file in the kustomization', () => {
  const kz = parseYaml(read('docker/k8s/kustomization.yaml'));
  for (const r of kz.resources) assert.ok(existsSync(join(DOCKER, 'k8s', r)), r);
  assert.deepEqual([...kz.resources].sort(), ['pdb.yaml', 'service.yaml', 'statefulset.yaml']);
});

test('k8s StatefulSet env should be valid config and agree with its port, volume and probes', () => {
  for (const [k, v] of Object.entries(k8sEnv)) {
    assert.ok(k.startsWith('SLUICE_'), `${k}: only SLUICE_* settings`);
    assert.equal(typeof v, 'string', `${k}: Kubernetes env values must be strings`);
  }
  const cfg = configFrom({ ...sluiceEnv(imageEnv), ...k8sEnv }, 'StatefulSet env');
  assert.equal(cfg.http.host, '0.0.0.0');
  // Routed /state queries reach each pod by its stable name under the headless Service.
  const podName = container.env.find((e: any) => e.name === 'POD_NAME');
  assert.equal(podName?.valueFrom?.fieldRef?.fieldPath, 'metadata.name');
  assert.equal(cfg.http.advertisedUrl, `http://$(POD_NAME).${sts.spec.serviceName}:${cfg.http.port}`);
  const http = container.ports.find((p: any) => p.name === 'http');
  assert.equal(http.containerPort, cfg.http.port, 'containerPort http is SLUICE_HTTP_PORT');
  assert.equal(container.livenessProbe.httpGet.path, '/healthz');
  assert.equal(container.readinessProbe.httpGet.path, '/readyz');
  for (const probe of [container.livenessProbe, container.readinessProbe])
    assert.ok(probe.httpGet.port === 'http' || probe.httpGet.port === cfg.http.port);
  const claim = sts.spec.volumeClaimTemplates[0].metadata.name;
  const mount = container.volumeMounts.find((m: any) => m.name === claim);
  assert.ok(mount, 'the claim template is mounted');
  assert.equal(mount.mountPath, cfg.state.dir, 'the claim holds SLUICE_STATE_DIR');
  assert.equal(sts.spec.template.metadata.annotations['prometheus.io/port'], String(cfg.http.port));
  assertJobExists(container.args[1], 'StatefulSet args');
  assert.equal(container.args[0], 'run');
});

test('k8s StatefulSet should run as the image user with a grace period longer than the 30 s shutdown', () => {
  const pod = sts.spec.template.spec;
  assert.equal(pod.securityContext.runAsNonRoot, true);
  assert.equal(pod.securityContext.runAsUser, 10001);
  assert.equal(pod.securityContext.fsGroup, 10001, 'the state volume is writable by that user');
  assert.ok(pod.terminationGracePeriodSeconds > 30);
  // A read-only root needs a writable /tmp.
  if (container.securityContext?.readOnlyRootFilesystem)
    assert.ok(container.volumeMounts.some((m: any) => m.mountPath === '/tmp'));
});

test('k8s Services should select the StatefulSet pods, one of them headless and governing', () => {
  const podLabels = sts.spec.template.metadata.labels;
  const svcs = k8s.filter((d) => d.kind === 'Service');
  assert.equal(svcs.length, 2);
  const headless = svcs.find((s) => s.spec.clusterIP === 'None');
  assert.ok(headless, 'a headless Service');
  assert.equal(sts.spec.serviceName, headless.metadata.name);
  for (const s of svcs) {
    for (const [k, v] of Object.entries(s.spec.selector))
      assert.equal(podLabels[k], v, `${s.metadata.name} selector`);
    assert.ok(s.spec.ports.some((p: any) => p.targetPort === 'http'));
  }
  assert.deepEqual(sts.spec.selector.matchLabels, podLabels);
  const pdb = k8s.find((d) => d.kind === 'PodDisruptionBudget');
  assert.deepEqual(pdb.spec.selector.matchLabels, podLabels);
});

// ---------------------------------------------------------------------------------------------
// The probe paths against the real HTTP server

test('the ops HTTP server should answer the probe paths used by the Dockerfile and the manifests', async (t) => {
  let ready = false;
  const server = await startOpsServer({
    host: '127.0.0.1',
    port: 0,
    registry: new Registry(),
    logger: createLogger({ level: 'silent', format: 'json' }),
    health: { live: () => true, ready: () => (ready ? { ready } : { ready, reason: 'restoring 0_1' }) },
  });
  t.after(() => server.close());
  const paths = [
    container.livenessProbe.httpGet.path,
    /\/healthz/.exec(runtime.ins.find((i) => i.op === 'HEALTHCHECK')!.args)![0],
  ];
  for (const p of paths) assert.equal((await fetch(`${server.url}${p}`)).status, 200, p);
  const readiness = container.readinessProbe.httpGet.path;
  assert.equal((await fetch(`${server.url}${readiness}`)).status, 503, 'not ready while restoring');
  ready = true;
  assert.equal((await fetch(`${server.url}${readiness}`)).status, 200);
  assert.equal((await fetch(`${server.url}/metrics`)).status, 200, 'the scrape path');
});
