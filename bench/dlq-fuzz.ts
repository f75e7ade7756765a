/**
 * The long run of the dead-letter fuzz (the CI test runs 400 records): N seeded good, huge,
 * skipped, undecodable and wrong-type records through W worker processes of the dlq fixture under
 * exactly-once, with a worker SIGKILLed and restarted every K ms while it runs. Then the check of
 * test/integration/dlq-fuzz.test.ts: every good record in the output exactly once, every poison
 * record in `<appId>-dlq` exactly once with the right headers (both read_committed).
 *
 *   npx tsc -p . && KAFKA_BROKERS=127.0.0.1:19092 node dist/bench/dlq-fuzz.js \
 *     [--records 20000] [--partitions 4] [--workers 2] [--kill-every-ms 4000] [--seed 1] [--huge 100000]
 *
 * Prints the counts, the kills, the time, and PASS or the first failed check (exit 1).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rng } from '../test/helpers/fuzz.js';
import { deleteTopicsMatching, jobTopics } from '../test/helpers/kafka.js';
import { fuzzRecords, produceRaw, verifyDlqRun } from '../test/helpers/poison.js';
import { spawnWorker, type WorkerProcess } from '../test/helpers/workers.js';

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v < 0) throw new Error(`--${name} needs a number`);
  return v;
}

const records = option('records', 20_000);
const partitions = option('partitions', 4);
const workers = option('workers', 2);
const killEveryMs = option('kill-every-ms', 4000);
const seed = option('seed', 1);
const huge = option('huge', 100_000);

const started = Date.now();
const job = await jobTopics('bench-dlqfuzz', partitions);
const input = fuzzRecords(rng(seed), records, partitions, huge);
await produceRaw(job.input, input);
console.log(`produced ${records} records in ${Date.now() - started} ms (seed ${seed})`);

const stateDirs = Array.from({ length: workers }, () => mkdtempSync(join(tmpdir(), 'sluice-bench-dlq-')));
const spawn = (i: number) => spawnWorker('dlq', { name: `w${i}`, env: job.env, stateDir: stateDirs[i]! });
const running: WorkerProcess[] = stateDirs.map((_, i) => spawn(i));
let kills = 0;
let done = false;
const killer = (async () => {
  const r = rng(seed + 7);
  while (!done && killEveryMs > 0) {
    await new Promise((res) => setTimeout(res, killEveryMs));
    if (done) break;
    const i = r.int(workers);
    await running[i]!.kill('SIGKILL');
    kills++;
    running[i] = spawn(i);
  }
})();

let failed: unknown;
const t0 = Date.now();
try {
  // The verifier waits for the output; stop killing once every good record is visible.
  const counts = await verifyDlqRun(job.id, job.input, job.output, input, 30 * 60_000).finally(() => {
    done = true;
  });
  console.log(
    `good ${counts.good}, poison ${counts.poison}, skipped ${counts.skipped}; ${workers} workers, ${kills} SIGKILLs; ` +
      `${Date.now() - t0} ms from the first spawn to the verified end`,
  );
} catch (e) {
  failed = e;
} finally {
  done = true;
  await killer;
  await Promise.all(running.map((w) => w.kill('SIGTERM')));
  await deleteTopicsMatching(job.id);
}
if (failed) {
  console.log(`FAIL: ${(failed as Error).message}`);
  process.exit(1);
}
console.log('PASS');
process.exit(0);
