/**
 * Micro-benchmark of the record cache (src/runtime/record-cache.ts): one cached operator, 10,000
 * string keys, updates in a spread order, a flush every 100,000 updates (a checkpoint). Prints
 * CPU µs per update (user + system of this process, which does nothing else). `--root` takes
 * another checkout's build (its dist/src/runtime/record-cache.js), to compare two versions.
 *
 *   npm run build && node dist/bench/record-cache-micro.js [--root ../other-checkout] [--updates 5000000]
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { optionValue } from './lib/args.js';
import { root } from './lib/procs.js';

interface Cache {
  wrap(
    id: number,
    operator: string,
    down: { push(k: unknown, v: unknown): void },
    rc: unknown,
  ): {
    push(k: unknown, v: unknown): void;
  };
  flush(rc: unknown): number;
}

async function main() {
  const from = resolve(optionValue('--root') ?? root);
  const updates = Number(optionValue('--updates') ?? 5_000_000);
  const mod = (await import(pathToFileURL(`${from}/dist/src/runtime/record-cache.js`).href)) as {
    RecordCache: new (max: () => number, guard: (push: () => void) => void) => Cache;
  };
  const rc = { key: null, timestamp: 0, headers: undefined, topic: '', offset: '0' };
  const cache = new mod.RecordCache(
    () => 2 ** 30,
    (push) => push(),
  );
  let out = 0;
  const op = cache.wrap(7, 'n', { push: () => out++ }, rc);
  const keys = Array.from({ length: 10_000 }, (_, i) => `user-${i}`);
  for (let round = 0; round < 2; round++) {
    const t = process.cpuUsage();
    for (let i = 0; i < updates; i++) {
      op.push(keys[(i * 7919) % 10_000]!, i);
      if (i % 100_000 === 99_999) cache.flush(rc);
    }
    cache.flush(rc);
    const u = process.cpuUsage(t);
    // The first round warms the JIT up.
    if (round === 1)
      console.log(
        `${from}: ${((u.user + u.system) / updates).toFixed(3)} CPU µs per update (${updates} updates, ${out / 2} downstream per round)`,
      );
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
