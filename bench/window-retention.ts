/**
 * Window state over a long run: does it stay flat? One worker of the window test job (tumbling,
 * hopping, sliding and session windows plus a window `process`, all over one input) reads a
 * stream whose event time advances 5 ms per record over `--keys` keys, for `--records` records
 * produced in chunks. After each chunk has been consumed it samples the worker (RocksDB folder
 * size `sluice_state_store_bytes`, write-back cache `sluice_state_cache_bytes`, RSS), then stops it
 * (SIGTERM: a final checkpoint), counts the live entries of every window and timer store in the
 * task folders with RocksStore, and starts it again on the same folder. Closed windows are
 * deleted, so the live entries should stay flat while the input grows.
 *
 *   npx tsc -p . && KAFKA_BROKERS=127.0.0.1:19092 node dist/bench/window-retention.js \
 *     [--records 600000] [--keys 2000] [--chunk 50000]
 *
 * Writes bench/results/window-retention-<YYYY-MM-DD>.md.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { RocksStore } from '../src/state/rocks-store.js';
import {
  createTopics,
  deleteTopicsMatching,
  produce,
  type TestRecord,
  uniqueName,
} from '../test/helpers/kafka.js';
import { metricSum, spawnWorker, type WorkerProcess } from '../test/helpers/workers.js';

const OPERATORS = ['tumbling', 'updates', 'hopping', 'sliding', 'session', 'collect'];
const STORES = OPERATORS.flatMap((o) => [`${o}-w`, `${o}-timers`]);

/** Live entries per store, summed over the app's task folders (the worker must be stopped). */
async function liveEntries(stateDir: string, appId: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = Object.fromEntries(STORES.map((s) => [s, 0]));
  const appDir = join(stateDir, appId);
  for (const task of readdirSync(appDir)) {
    const db = await RocksStore.open({ dir: join(appDir, task), stores: STORES });
    try {
      for (const s of STORES) counts[s]! += db.scanSync(s).length;
    } finally {
      await db.close();
    }
  }
  return counts;
}

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

function option(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} expects a positive number`);
  return Math.floor(v);
}

const RECORDS = option('records', 600_000);
const KEYS = option('keys', 2000);
const CHUNK = option('chunk', 50_000);

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

async function main() {
  const id = uniqueName('bench-wret');
  const input = `${id}-in`;
  const outs = ['tumbling', 'updates', 'hopping', 'sliding', 'session', 'process', 'late'];
  await createTopics([input, ...outs.map((o) => `${id}-${o}`)].map((topic) => ({ topic, partitions: 4 })));
  const stateDir = mkdtempSync(join(tmpdir(), 'sluice-wret-'));
  const start = () =>
    spawnWorker('windows', {
      name: 'bench',
      stateDir,
      env: { TEST_APP_ID: id, TEST_INPUT: input, TEST_GRACE: '1000' },
    });
  let w: WorkerProcess = start();
  const rows: string[] = [];
  const started = Date.now();
  try {
    await w.url();
    for (let sent = 0; sent < RECORDS; sent += CHUNK) {
      const batch: TestRecord[] = [];
      for (let i = sent; i < Math.min(RECORDS, sent + CHUNK); i++) {
        const k = `k${(i * 7919) % KEYS}`;
        batch.push({ key: k, value: JSON.stringify({ k, v: i % 10, t: 1_000_000 + i * 5 }) });
      }
      await produce(input, batch, 5000);
      const done = Math.min(RECORDS, sent + CHUNK);
      // Wait until the worker has read what was sent, then let a state-size refresh happen.
      for (;;) {
        const m = await w.metrics().catch(() => '');
        if (metricSum(m, 'sluice_records_in_total', { topic: input }) >= done - sent) break;
        await new Promise((r) => setTimeout(r, 500));
      }
      await new Promise((r) => setTimeout(r, 6000));
      const m = await w.metrics();
      const rss = rssMb(w.child.pid!);
      await w.kill('SIGTERM');
      const live = await liveEntries(stateDir, id);
      const windows = OPERATORS.map((o) => live[`${o}-w`]);
      const timers = OPERATORS.reduce((a, o) => a + live[`${o}-timers`]!, 0);
      const row = [
        done,
        ((done * 5) / 1000).toFixed(0),
        windows.join(' / '),
        timers,
        (metricSum(m, 'sluice_state_store_bytes') / 2 ** 20).toFixed(1),
        (metricSum(m, 'sluice_state_cache_bytes') / 2 ** 20).toFixed(1),
        rss.toFixed(0),
        ((Date.now() - started) / 1000).toFixed(0),
      ];
      rows.push(`| ${row.join(' | ')} |`);
      console.log(rows[rows.length - 1]);
      if (done < RECORDS) {
        w = start();
        await w.url();
      }
    }
  } catch (e) {
    console.error(`worker exit: ${w.child.exitCode ?? w.child.signalCode}\n${w.logs.slice(-40).join('\n')}`);
    throw e;
  } finally {
    await w.kill('SIGKILL');
    await deleteTopicsMatching(id);
  }
  const date = new Date().toISOString().slice(0, 10);
  const file = join(root, `bench/results/window-retention-${date}.md`);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(
    file,
    [
      `# Window state over a long run (${date})`,
      '',
      `\`node dist/bench/window-retention.js --records ${RECORDS} --keys ${KEYS} --chunk ${CHUNK}\`: one worker of`,
      '`test/fixtures/jobs/windows.ts` (6 windowed operators: tumbling ×3, hopping, sliding, session; grace 1 s),',
      `${KEYS} keys, event time +5 ms per record, 4 partitions. After each chunk was consumed (+6 s): the worker's`,
      'RocksDB folder size, cache and RSS, then a clean stop, a count of the live entries of every store in the task',
      'folders, and a restart on the same folder. Window entries are per key (one entry holds all open windows of',
      `the key), listed as ${OPERATORS.join(' / ')}.`,
      '',
      '| records | event time (s) | live window entries | live timers | RocksDB folder (MiB) | cache (MiB) | RSS (MiB) | wall (s) |',
      '| --- | --- | --- | --- | --- | --- | --- | --- |',
      ...rows,
      '',
    ].join('\n'),
  );
  console.log(`wrote ${file}`);
}

await main();
