/**
 * The ceiling of any kafkajs-based processor: a plain kafkajs group consumer that decodes every
 * record (UTF-8 key, JSON.parse of the value) and does nothing else — no output, no commit
 * protocol, no state. Started by bench/run.ts with BENCH_BROKERS, BENCH_INPUT, BENCH_APP_ID
 * (group id) and BENCH_RECORDS; prints `READY` once it has partitions, `FIRST <ms>` at the first
 * record, `P10 <ms>` and `P90 <ms>` when 10 % and 90 % of BENCH_RECORDS are decoded (the steady
 * rate) and `DONE <ms> <n>` when n ≥ BENCH_RECORDS (times from performance.now()), then idles
 * until killed so the driver can read its /proc entries. bench/ceiling-platformatic.ts is the same
 * for @platformatic/kafka. kafkajs's defaults: maxBytes 10 MB, maxBytesPerPartition 1 MB, maxWait 5 s.
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Kafka, logLevel } = require('kafkajs') as typeof import('kafkajs');

const need = (k: string) => {
  const v = process.env[k];
  if (!v) throw new Error(`missing environment variable ${k}`);
  return v;
};
const brokers = need('BENCH_BROKERS').split(',');
const topic = need('BENCH_INPUT');
const groupId = need('BENCH_APP_ID');
const records = Number(need('BENCH_RECORDS'));

const kafka = new Kafka({ brokers, clientId: 'bench-ceiling', logLevel: logLevel.NOTHING });
const consumer = kafka.consumer({ groupId, sessionTimeout: 10_000, heartbeatInterval: 3000 });
let n = 0;
let checksum = 0;
let done = false;
const p10 = Math.ceil(records * 0.1);
const p90 = Math.ceil(records * 0.9);
consumer.on(consumer.events.GROUP_JOIN, () => console.log('READY'));
await consumer.connect();
await consumer.subscribe({ topic, fromBeginning: true });
await consumer.run({
  eachBatch: async ({ batch }) => {
    for (const m of batch.messages) {
      const key = m.key ? m.key.toString('utf8') : '';
      const v = JSON.parse(m.value!.toString('utf8')) as { seq: number };
      checksum = (checksum + v.seq + key.length) % 1_000_000_007;
      if (n++ === 0) console.log(`FIRST ${performance.now()}`);
      if (n === p10) console.log(`P10 ${performance.now()}`);
      if (n === p90) console.log(`P90 ${performance.now()}`);
    }
    if (!done && n >= records) {
      done = true;
      console.log(`DONE ${performance.now()} ${n} ${checksum}`);
    }
  },
});
