/**
 * How long a bench worker's event loop was held: loaded into every node process of a bench run,
 *
 *   NODE_OPTIONS="--import $PWD/dist/bench/loop-stalls.js" KAFKA_BROKERS=127.0.0.1:9092 \
 *     node dist/bench/cpu.js --workload count-1e6-uniform --runs 4 --base ../other-worktree
 *
 * it acts only in the Sluice workers the benches start (BENCH_APP_ID and BENCH_WORKLOAD set) and
 * writes, every 500 ms, `<tmpdir>/sluice-stalls-<pid>.json`: how many times a 5 ms timer ran more
 * than 20, 50 and 100 ms late, the latest it ran (from the start, startup included), and the
 * worker's command line (which build).
 * Lateness includes the machine's scheduling: compare builds pair by pair, as cpu.ts does.
 */
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const TICK_MS = 5;

if (process.env.BENCH_APP_ID && process.env.BENCH_WORKLOAD) {
  const stalls = { over20ms: 0, over50ms: 0, over100ms: 0, maxMs: 0, argv: process.argv.slice(1).join(' ') };
  let last = performance.now();
  setInterval(() => {
    const now = performance.now();
    const late = now - last - TICK_MS;
    last = now;
    if (late > 20) stalls.over20ms++;
    if (late > 50) stalls.over50ms++;
    if (late > 100) stalls.over100ms++;
    stalls.maxMs = Math.max(stalls.maxMs, Math.round(late));
  }, TICK_MS).unref();
  const file = join(tmpdir(), `sluice-stalls-${process.pid}.json`);
  setInterval(() => writeFileSync(file, JSON.stringify(stalls)), 500).unref();
}
