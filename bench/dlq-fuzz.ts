/**
 * The long run of the dead-letter fuzz (the CI test runs 400 records): N seeded good, huge,
 * skipped, undecodable and wrong-type records through W worker processes of the dlq fixture under
 * exactly-once, with a worker SIGKILLed and restarted every K ms while it runs. Then the check of
 * test/integration/dlq-fuzz.test.ts: every good record in the output exactly once, every poison
 * record in `<appId>-dlq` exactly once with the right headers (both read_committed).
 *
 *   npx tsc -p . && KAFKA_BROKERS=127.0.0.1:19092 node dist/bench/dlq-fuzz.js \
 *     [--records 20000] [--partitions 4] [--workers 2] [--kill-every-ms 30000] [--seed 1] [--huge 20000]
 *
 * Prints the counts, the kills, the time, and PASS or the first failed check (exit 1).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rng } from '../test/helpers/fuzz.js';
import { deleteTopicsMatching, jobTopics, withAdmin } from '../test/helpers/kafka.js';
import { fuzzRecords, produceRaw, verifyDlqRun } from '../test/helpers/poison.js';
import { spawnWorker, type WorkerProcess } from '../test/helpers/workers.js';
import { readCommittedWithJava } from './java-reader.js';

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
const killEveryMs = option('kill-every-ms', 30_000);
const seed = option('seed', 1);
const huge = option('huge', 20_000);

const started = Date.now();
const job = await jobTopics('bench-dlqfuzz', partitions);
const input = fuzzRecords(rng(seed), records, partitions, huge);
await produceRaw(job.input, input);
console.log(`produced ${records} records in ${Date.now() - started} ms (seed ${seed})`);

const stateDirs = Array.from({ length: workers }, () => mkdtempSync(join(tmpdir(), 'sluice-bench-dlq-')));
// A SIGKILLed member holds its partitions until its session expires: keep that short, and the
// kills further apart than it, or the group never settles (a property of the group protocol).
const env = {
  ...job.env,
  SLUICE_KAFKA_SESSION_TIMEOUT_MS: '10000',
  SLUICE_KAFKA_HEARTBEAT_INTERVAL_MS: '1000',
};
const spawn = (i: number) => spawnWorker('dlq', { name: `w${i}`, env, stateDir: stateDirs[i]! });
const running: WorkerProcess[] = stateDirs.map((_, i) => spawn(i));
let kills = 0;
let done = false;
// Never leave workers behind: they are our children, not detached.
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    for (const w of running) w.child.kill('SIGKILL');
    process.exit(130);
  });
}
const progress = setInterval(async () => {
  const ends = await withAdmin((a) => a.fetchTopicOffsets(job.output)).catch(() => []);
  const high = ends.reduce((n, p) => n + Number(p.high), 0);
  console.log(
    `${Math.round((Date.now() - started) / 1000)} s: output log end ${high} (records + commit markers), ${kills} SIGKILLs`,
  );
}, 15_000);
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
  clearInterval(progress);
  await killer;
  // A worker that has not exited 40 s after SIGTERM is reported and killed.
  await Promise.all(
    running.map(async (w) => {
      const code = await Promise.race([
        w.kill('SIGTERM'),
        new Promise((r) => setTimeout(() => r('stuck'), 40_000)),
      ]);
      if (code === 'stuck') {
        console.log(`${w.name} did not exit within 40 s of SIGTERM; SIGKILL`);
        await w.kill('SIGKILL');
      }
    }),
  );
  if (!failed) await deleteTopicsMatching(job.id);
}
if (failed) {
  console.log(`kafkajs reader: ${(failed as Error).message}`);
  // Second opinion from Kafka's own read_committed consumer, on the kept topics.
  const brokers = process.env.KAFKA_BROKERS!.split(',')[0]!;
  const out = await readCommittedWithJava(brokers, job.output, { withValues: true });
  const dlq = await readCommittedWithJava(brokers, `${job.id}-dlq`, { withValues: false });
  const good = input.filter((r) => r.fate === 'out').length;
  const poison = input.filter((r) => r.fate.startsWith('dlq')).length;
  const seqs = new Set(out.map((r) => JSON.parse(r.value).seq as number));
  const sources = new Set(
    dlq.map((r) => `${r.headers['sluice.source.partition']}@${r.headers['sluice.source.offset']}`),
  );
  console.log(
    `Java read_committed: output ${out.length} records, ${seqs.size} distinct seqs (expected ${good}); ` +
      `DLQ ${dlq.length} records, ${sources.size} distinct sources (expected ${poison})`,
  );
  if (out.length === good && seqs.size === good && dlq.length === poison && sources.size === poison) {
    console.log(
      "PASS by Kafka's own reader: the kafkajs test reader delivered records of aborted transactions",
    );
    await deleteTopicsMatching(job.id);
    process.exit(0);
  }
  console.log(`FAIL (topics ${job.id}-* kept)`);
  process.exit(1);
}
console.log('PASS');
process.exit(0);
