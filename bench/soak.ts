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
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { localKafkaStatus, startLocalKafka, stopLocalKafka } from '../src/dev/local-kafka.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Options {
  minutes: number;
  rate: number;
  keys: number;
  every: number;
  kafkaPort: number;
  write: boolean;
}

function parseOptions(argv: string[]): Options {
  const o: Options = { minutes: 30, rate: 300, keys: 1000, every: 45, kafkaPort: 39796, write: true };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const num = () => {
      const v = Number(argv[++i]);
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${flag} expects a positive number`);
      return v;
    };
    if (flag === '--minutes') o.minutes = num();
    else if (flag === '--rate') o.rate = num();
    else if (flag === '--keys') o.keys = Math.floor(num());
    else if (flag === '--every') o.every = num();
    else if (flag === '--kafka-port') o.kafkaPort = Math.floor(num());
    else if (flag === '--no-write') o.write = false;
    else throw new Error(`unknown option ${flag}`);
  }
  return o;
}

const t0 = Date.now();
const elapsed = () => ((Date.now() - t0) / 1000).toFixed(0);
const events: string[] = [];
function note(msg: string): void {
  const line = `+${elapsed()}s ${msg}`;
  events.push(line);
  process.stderr.write(`[soak] ${line}\n`);
}

async function main(): Promise<number> {
  const o = parseOptions(process.argv.slice(2));
  const dataDir = mkdtempSync(join(tmpdir(), 'sluice-soak-kafka-'));
  const launcherEnv = { ...process.env, KAFKA_BROKERS: '' };
  const startBroker = async () => {
    const k = await startLocalKafka({
      port: o.kafkaPort,
      dataDir,
      env: launcherEnv,
      readyTimeoutMs: 180_000,
    });
    process.env.KAFKA_BROKERS = k.brokers.join(',');
  };
  await startBroker();
  // The helpers read KAFKA_BROKERS when first used: import them only now.
  const { jobTopics, readAll, testKafka } = await import('../test/helpers/kafka.js');
  const { spawnWorker } = await import('../test/helpers/workers.js');
  type W = ReturnType<typeof spawnWorker>;
  const stateDirs: string[] = [];
  const workers: Array<W | undefined> = [];
  let exitCode = 1;
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
    const spawn = (i: number) => {
      workers[i] = spawnWorker('running-sum', { name: `w${i}`, stateDir: stateDirs[i]!, env, args });
      workers[i]!.exited.then((c) => {
        if (c !== 'SIGKILL' && c !== 0 && c !== 'SIGTERM') note(`w${i} exited by itself (${c})`);
      });
    };
    for (let i = 0; i < 3; i++) {
      stateDirs.push(mkdtempSync(join(tmpdir(), `sluice-soak-${i}-`)));
      spawn(i);
    }
    note(
      `broker at ${process.env.KAFKA_BROKERS}, 3 workers, ${o.rate} records/s over ${o.keys} keys, ${o.minutes} min`,
    );

    // Paced producer: pauses around the planned broker restart; a send that fails is retried
    // after a pause (the verifier derives expectations from the input topic, so a duplicate
    // written by such a retry is simply one more input record).
    let producing = true;
    let paused = false;
    let produced = 0;
    let sendErrors = 0;
    let seq = 0;
    const producerDone = (async () => {
      const p = testKafka().producer({
        idempotent: true,
        maxInFlightRequests: 1,
        allowAutoTopicCreation: false,
      });
      await p.connect();
      const started = Date.now();
      let rnd = 12345;
      const next = () => {
        rnd = (Math.imul(rnd, 1103515245) + 12345) >>> 0;
        return rnd / 4294967296;
      };
      while (producing) {
        if (paused) {
          await sleep(200);
          continue;
        }
        const batch = Math.max(1, Math.floor(o.rate / 10));
        const messages = [];
        for (let i = 0; i < batch; i++) {
          const k = `k${Math.floor(next() * o.keys)}`;
          messages.push({ key: k, value: JSON.stringify({ k, v: 1 + Math.floor(next() * 9), seq: seq++ }) });
        }
        try {
          await p.send({ topic: input, acks: -1, messages });
          produced += messages.length;
        } catch (e) {
          sendErrors++;
          note(`input send failed (${(e as Error).message}); retrying the batch`);
          await sleep(1000);
          try {
            await p.send({ topic: input, acks: -1, messages });
            produced += messages.length;
          } catch {
            // Given up: the verifier reads what really is in the input topic.
          }
        }
        const due = started + (produced / o.rate) * 1000;
        if (due > Date.now()) await sleep(due - Date.now());
      }
      await p.disconnect().catch(() => undefined);
    })();

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
    producing = false;
    await producerDone;
    note(`input stopped: ${produced} records sent (${sendErrors} send errors)`);

    // Verify: expectations from the input topic as stored, then the output must match exactly.
    const inRecords = await readAll(input, { expected: produced, timeoutMs: 300_000, settleMs: 5000 });
    inRecords.sort((a, b) => a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)));
    const expected = new Map<string, number[]>();
    for (const r of inRecords) {
      const v = JSON.parse(r.value!) as { k: string; v: number };
      let l = expected.get(v.k);
      if (!l) expected.set(v.k, (l = []));
      l.push((l[l.length - 1] ?? 0) + v.v);
    }
    const catchUpStart = Date.now();
    const out = await readAll(output, { expected: inRecords.length, timeoutMs: 900_000, settleMs: 10_000 });
    const catchUp = (Date.now() - catchUpStart) / 1000;
    out.sort((a, b) => a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)));
    const got = new Map<string, number[]>();
    for (const r of out) {
      const v = JSON.parse(r.value!) as { k: string; sum: number };
      let l = got.get(v.k);
      if (!l) got.set(v.k, (l = []));
      l.push(v.sum);
    }
    const problems: string[] = [];
    for (const [k, sums] of expected) {
      const g = got.get(k) ?? [];
      if (g.length !== sums.length || g.some((x, i) => x !== sums[i])) {
        const i = g.findIndex((x, j) => x !== sums[j]);
        problems.push(`key ${k}: ${g.length} outputs for ${sums.length} inputs, first difference at #${i}`);
      }
    }
    for (const k of got.keys()) if (!expected.has(k)) problems.push(`key ${k}: output without input`);
    const exact = problems.length === 0 && out.length === inRecords.length;
    note(
      `verifier: ${inRecords.length} input records, ${out.length} output records, ${expected.size} keys: ${exact ? 'EXACT' : `NOT EXACT (${problems.length} keys differ)`}`,
    );
    const minutes = (Date.now() - t0) / 60_000;
    const md = [
      `## Soak ${new Date().toISOString()}: ${exact ? 'exact' : 'NOT EXACT'}`,
      '',
      `- command: \`node dist/bench/soak.js ${process.argv.slice(2).join(' ')}\``,
      `- ran ${minutes.toFixed(1)} min in all (${o.minutes} min of input and chaos, then catch-up and verification); node ${process.version}, ${cpus().length} CPUs shared with other jobs`,
      `- running-sum job, exactly_once, 3 workers, 6 input partitions, ${o.rate} records/s over ${o.keys} keys`,
      `- chaos: ${counts.sigkill} SIGKILLs (${counts.wiped} with the state folder deleted), ${counts.scaleDown} scale-downs 3 → 2 and ${counts.scaleUp} scale-ups 2 → 3, ${counts.brokerRestarts} broker restart (SIGKILL, ~10 s down)`,
      `- input: ${inRecords.length.toLocaleString('en')} records (${sendErrors} failed sends retried); output: ${out.length.toLocaleString('en')} records; catch-up after the input stopped: ${catchUp.toFixed(0)} s (includes the 10 s settle of the reader)`,
      `- verifier: ${exact ? 'every key’s output is exactly its running sums, in order, once' : problems.slice(0, 10).join('; ')}`,
      '',
      '<details><summary>events</summary>',
      '',
      '```',
      ...events,
      '```',
      '</details>',
      '',
    ].join('\n');
    process.stdout.write(`${md}\n`);
    if (o.write) {
      const dir = join(root, 'bench/results');
      if (!existsSync(dir)) mkdirSync(dir, { recursive: true });
      const file = join(dir, `soak-${new Date().toISOString().slice(0, 10)}.md`);
      if (!existsSync(file)) appendFileSync(file, '# Sluice soak (bench/soak.ts)\n\n');
      appendFileSync(file, `${md}\n`);
      process.stderr.write(`written to ${file}\n`);
    }
    if (!exact)
      for (const w of workers) process.stderr.write(`--- ${w?.name}\n${w?.logs.slice(-30).join('\n')}\n`);
    exitCode = exact ? 0 : 1;
  } finally {
    await Promise.all(workers.map((w) => w?.kill('SIGKILL')));
    for (const d of stateDirs) rmSync(d, { recursive: true, force: true });
    await stopLocalKafka({ port: o.kafkaPort, dataDir, env: launcherEnv }).catch(() => undefined);
    rmSync(dataDir, { recursive: true, force: true });
  }
  return exitCode;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`${e?.stack ?? e}\n`);
    process.exit(1);
  },
);
