/**
 * Soak (issue 8, item 5): the running-sum job under exactly-once for a long time while things
 * break, then an exact check of every output record.
 *
 * - Its OWN broker (the launcher, --kafka-port, default 39796, and a temporary data dir), so it can
 *   be restarted without disturbing anyone; KAFKA_BROKERS is ignored for that reason.
 * - 3 workers of test/fixtures/jobs/running-sum.ts, each with its own state folder.
 * - Continuous paced input (--rate records/s, default 300, --keys distinct keys, default 1000).
 * - Chaos, one event every --every seconds (default 45), in this cycle: SIGKILL a random worker
 *   and restart it a few seconds later; SIGKILL one and restart it with its state folder deleted
 *   (full restore); scale 3 → 2 (SIGTERM one) and, one event later, 2 → 3. One broker restart
 *   (SIGKILL, down ~10 s, restart on the same data) half-way through.
 * - At the end, input stops, the workers catch up, and a verifier reads the input and the output
 *   (read_committed) and checks that the output holds, per key, exactly the running sums of that
 *   key's input in input order: nothing lost, nothing repeated. Expectations are computed from the
 *   input topic itself, so a producer retry during the outage cannot fool the check.
 *
 *   npx tsc -p . && node dist/bench/soak.js [--minutes 30] [--rate 300] [--keys 1000]
 *     [--every 45] [--kafka-port 39796] [--no-write]
 *
 * The result is printed and appended to bench/results/soak-<YYYY-MM-DD>.md; exit code 1 when the
 * output is not exact.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { localKafkaStatus, startLocalKafka, stopLocalKafka } from '../src/dev/local-kafka.js';
import { jobTopics } from '../test/helpers/kafka.js';
import {
  eventLog,
  pacedInput,
  parseSoakOptions,
  report,
  runSoak,
  sleep,
  verdictBullet,
  verdictLine,
  verifyRunningSums,
  workerSlots,
} from './lib/soak-harness.js';

async function main(): Promise<number> {
  const o = parseSoakOptions(process.argv.slice(2), {
    minutes: 30,
    rate: 300,
    keys: 1000,
    every: 45,
    kafkaPort: 39796,
    write: true,
  });
  const { t0, note, lines: events } = eventLog('soak');
  const dataDir = mkdtempSync(join(tmpdir(), 'sluice-soak-kafka-'));
  const launcherEnv = { ...process.env, KAFKA_BROKERS: '' };
  const startBroker = async () => {
    const k = await startLocalKafka({
      port: o.kafkaPort,
      dataDir,
      env: launcherEnv,
      readyTimeoutMs: 180_000,
    });
    // The test helpers read KAFKA_BROKERS when first used: this broker's, from here on.
    process.env.KAFKA_BROKERS = k.brokers.join(',');
  };
  await startBroker();
  let exitCode = 1;
  let slots: ReturnType<typeof workerSlots> | undefined;
  try {
    const { input, output, env } = await jobTopics('soak', 6);
    const args = [
      '--processing.guarantee',
      'exactly_once',
      '--log-level',
      'warn',
      '--kafka.sessionTimeoutMs',
      '10000',
    ];
    slots = workerSlots({ n: 3, prefix: 'soak', env, args, note });
    const { workers, stateDirs, spawn } = slots;
    note(
      `broker at ${process.env.KAFKA_BROKERS}, 3 workers, ${o.rate} records/s over ${o.keys} keys, ${o.minutes} min`,
    );
    // Paced input, paused around the planned broker restart.
    let paused = false;
    const feed = pacedInput({ topic: input, rate: o.rate, keys: o.keys, note, paused: () => paused });

    // Chaos.
    const end = t0 + o.minutes * 60_000;
    const brokerAt = t0 + (o.minutes * 60_000) / 2;
    let brokerRestarted = false;
    let step = 0;
    let scaledDown: number | undefined;
    const counts = { sigkill: 0, wiped: 0, scaleDown: 0, scaleUp: 0, brokerRestarts: 0 };
    while (Date.now() < end - o.every * 1000) {
      await sleep(o.every * 1000 * (0.7 + Math.random() * 0.6));
      if (!brokerRestarted && Date.now() >= brokerAt) {
        brokerRestarted = true;
        paused = true;
        await sleep(500);
        const st = await localKafkaStatus({ port: o.kafkaPort, dataDir, env: launcherEnv });
        process.kill(-st.pid!, 'SIGKILL');
        note(`broker SIGKILLed (pid ${st.pid}); down for 10 s`);
        await sleep(10_000);
        await startBroker();
        counts.brokerRestarts++;
        note('broker restarted on the same data');
        paused = false;
        continue;
      }
      const kind = step++ % 4;
      if (scaledDown !== undefined) {
        spawn(scaledDown);
        counts.scaleUp++;
        note(`scale 2 → 3: w${scaledDown} started again`);
        scaledDown = undefined;
      } else if (kind === 0 || kind === 1) {
        const i = Math.floor(Math.random() * 3);
        await workers[i]!.kill('SIGKILL');
        if (kind === 1) {
          rmSync(stateDirs[i]!, { recursive: true, force: true });
          mkdirSync(stateDirs[i]!, { recursive: true });
          counts.wiped++;
        }
        counts.sigkill++;
        note(`w${i} SIGKILLed${kind === 1 ? ', state folder deleted' : ''}`);
        await sleep(1000 + Math.random() * 4000);
        spawn(i);
        note(`w${i} restarted`);
      } else {
        const i = Math.floor(Math.random() * 3);
        await workers[i]!.kill('SIGTERM');
        scaledDown = i;
        counts.scaleDown++;
        note(`scale 3 → 2: w${i} stopped (SIGTERM)`);
      }
    }
    if (scaledDown !== undefined) {
      spawn(scaledDown);
      counts.scaleUp++;
      note(`scale 2 → 3: w${scaledDown} started again`);
    }
    while (Date.now() < end) await sleep(1000);
    await feed.stop();
    note(`input stopped: ${feed.state.produced} records sent (${feed.state.sendErrors} send errors)`);

    // Verify: expectations from the input topic as stored, then the output must match exactly.
    const v = await verifyRunningSums(process.env.KAFKA_BROKERS!, input, output, 900_000);
    note(verdictLine(v));
    const minutes = (Date.now() - t0) / 60_000;
    const md = [
      `## Soak ${new Date().toISOString()}: ${v.exact ? 'exact' : 'NOT EXACT'}`,
      '',
      `- command: \`node dist/bench/soak.js ${process.argv.slice(2).join(' ')}\``,
      `- ran ${minutes.toFixed(1)} min in all (${o.minutes} min of input and chaos, then catch-up and verification); node ${process.version}, ${cpus().length} CPUs shared with other jobs`,
      `- running-sum job, exactly_once, 3 workers, 6 input partitions, ${o.rate} records/s over ${o.keys} keys`,
      `- chaos: ${counts.sigkill} SIGKILLs (${counts.wiped} with the state folder deleted), ${counts.scaleDown} scale-downs 3 → 2 and ${counts.scaleUp} scale-ups 2 → 3, ${counts.brokerRestarts} broker restart (SIGKILL, ~10 s down)`,
      `- input: ${v.inputs.toLocaleString('en')} records (${feed.state.sendErrors} failed sends retried); output: ${v.outputs.toLocaleString('en')} records; catch-up after the input stopped: ${v.catchUpS.toFixed(0)} s`,
      verdictBullet(v),
      '',
      '<details><summary>events</summary>',
      '',
      '```',
      ...events,
      '```',
      '</details>',
      '',
    ].join('\n');
    report({
      name: 'soak',
      title: 'Sluice soak (bench/soak.ts)',
      md,
      write: o.write,
      exact: v.exact,
      workers,
    });
    exitCode = v.exact ? 0 : 1;
  } finally {
    await slots?.cleanup();
    await stopLocalKafka({ port: o.kafkaPort, dataDir, env: launcherEnv }).catch(() => undefined);
    rmSync(dataDir, { recursive: true, force: true });
  }
  return exitCode;
}

runSoak(main);
