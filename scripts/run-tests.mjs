#!/usr/bin/env node
// The test command: starts a local Kafka (unless KAFKA_BROKERS points at one), runs every test
// with Node's runner against it, and stops the broker it started, whatever the outcome.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocalKafka, stopLocalKafka } from '../dist/src/dev/local-kafka.js';

const port = Number(process.env.SLUICE_TEST_KAFKA_PORT_BASE ?? 39092);
const dataDir = mkdtempSync(join(tmpdir(), 'sluice-test-kafka-'));
let started = false;
const env = { ...process.env };
if (!env.KAFKA_BROKERS) {
  const t0 = Date.now();
  const k = await startLocalKafka({ port, dataDir, log: (m) => process.stderr.write(`[kafka] ${m}\n`) });
  started = !k.alreadyRunning;
  env.KAFKA_BROKERS = k.brokers.join(',');
  process.stderr.write(
    `[kafka] ${k.version} ready at ${env.KAFKA_BROKERS} in ${Date.now() - t0} ms (log ${k.logFile})\n`,
  );
}
delete env.SLUICE_TEST_KAFKA_PORT_BASE;
const files = process.argv.slice(2);
const targets = files.length > 0 ? files : ['dist/test/unit', 'dist/test/integration'];
const child = spawn(process.execPath, ['--test', '--test-concurrency=2', ...targets], {
  stdio: 'inherit',
  env,
});
const stop = async () => {
  if (started) {
    await stopLocalKafka({ port, dataDir }).catch((e) => process.stderr.write(`[kafka] stop failed: ${e}\n`));
    rmSync(dataDir, { recursive: true, force: true });
  }
};
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
const code = await new Promise((r) => child.once('exit', (c, s) => r(c ?? (s ? 1 : 0))));
await stop();
process.exit(code);
