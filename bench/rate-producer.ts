/**
 * The latency bench's input, in a process of its own so that the reader's decoding in the driver
 * does not delay its ticks: produces BENCH_RATE records/s of the workload (bench/workloads.ts,
 * BENCH_SEED, BENCH_KEYS uniform) to BENCH_INPUT, in 5 ms ticks of at most 500 records per
 * request and at most 32 requests in flight, each record's timestamp = its send time (Date.now());
 * the rate it reached is reported (below the target when the broker could not keep up). Prints `READY` once connected,
 * and on SIGTERM waits for its requests and prints `SENT <n> <errors> <seconds sending> <first error>`, then exits.
 */
import { testKafka } from '../test/helpers/kafka.js';
import { eventMaker } from './workloads.js';

const need = (k: string) => {
  const v = process.env[k];
  if (!v) throw new Error(`missing environment variable ${k}`);
  return v;
};
const topic = need('BENCH_INPUT');
const rate = Number(need('BENCH_RATE'));
const make = eventMaker(Number(need('BENCH_SEED')), { keys: Number(need('BENCH_KEYS')), dist: 'uniform' });

let stopping = false;
process.on('SIGTERM', () => {
  stopping = true;
});
const p = testKafka().producer({ allowAutoTopicCreation: false });
await p.connect();
console.log('READY');
const pending = new Set<Promise<unknown>>();
let sent = 0;
let errors = 0;
let firstError = '';
const t0 = performance.now();
let stoppedAt = 0;
while (!stopping) {
  const due = Math.floor(((performance.now() - t0) / 1000) * rate);
  while (sent < due) {
    const ts = String(Date.now());
    const messages: Array<{ key: string; value: string; timestamp: string }> = [];
    for (; sent < due && messages.length < 500; sent++) messages.push({ ...make(sent), timestamp: ts });
    const pr: Promise<unknown> = p
      .send({ topic, acks: -1, messages })
      .catch((e: Error) => {
        errors += messages.length;
        firstError ||= e.message;
      })
      .finally(() => pending.delete(pr));
    pending.add(pr);
    // At most 32 requests in flight: when the broker falls behind, records wait here (and are
    // stamped when they go) instead of piling up as requests that time out and are retried.
    while (pending.size >= 32) await Promise.race(pending);
  }
  await new Promise((r) => setTimeout(r, 5));
}
stoppedAt = performance.now();
await Promise.all(pending);
await p.disconnect();
console.log(
  `SENT ${sent} ${errors} ${((stoppedAt - t0) / 1000).toFixed(3)} ${firstError.replace(/\s+/g, ' ')}`,
);
process.exit(0);
