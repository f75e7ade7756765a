/**
 * The decode-only ceiling of @platformatic/kafka (issue 14 item 4), the twin of bench/ceiling.ts:
 * a group consumer that decodes every record (UTF-8 key and value, JSON.parse of the value) and
 * does nothing else. Runs on Node 24 (the client needs it); the package is not a dependency of
 * Sluice: bench/lib/ceilings.ts installs it into a cache folder and passes its folder as
 * BENCH_PLATFORMATIC_KAFKA. Same environment and output lines as bench/ceiling.ts. The client's
 * defaults are kept (maxBytes 50 MB, maxWaitTime 5 s, a stream highWaterMark of 1024 messages), as
 * kafkajs's are, unless BENCH_PLATFORMATIC_HWM sets the stream's highWaterMark (the client fetches
 * again only once its stream's buffer is below it).
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const need = (k: string) => {
  const v = process.env[k];
  if (!v) throw new Error(`missing environment variable ${k}`);
  return v;
};

interface PlatformaticMessage {
  key: string | undefined;
  value: string | undefined;
}
interface PlatformaticStream {
  on(event: 'data', fn: (m: PlatformaticMessage) => void): void;
  on(event: 'error', fn: (e: Error) => void): void;
}
interface PlatformaticConsumer {
  on(event: string, fn: () => void): void;
  consume(opts: Record<string, unknown>): Promise<PlatformaticStream>;
}
interface PlatformaticKafka {
  Consumer: new (opts: Record<string, unknown>) => PlatformaticConsumer;
  stringDeserializers: unknown;
}

const dir = need('BENCH_PLATFORMATIC_KAFKA');
const lib = (await import(pathToFileURL(join(dir, 'dist/index.js')).href)) as PlatformaticKafka;
const brokers = need('BENCH_BROKERS').split(',');
const topic = need('BENCH_INPUT');
const groupId = need('BENCH_APP_ID');
const records = Number(need('BENCH_RECORDS'));
const p10 = Math.ceil(records * 0.1);
const p90 = Math.ceil(records * 0.9);

const consumer = new lib.Consumer({
  groupId,
  clientId: 'bench-ceiling-platformatic',
  bootstrapBrokers: brokers,
  deserializers: lib.stringDeserializers,
});
let n = 0;
let checksum = 0;
let done = false;
consumer.on('consumer:group:join', () => console.log('READY'));
const stream = await consumer.consume({
  topics: [topic],
  mode: 'earliest',
  autocommit: false,
  sessionTimeout: 10_000,
  heartbeatInterval: 3000,
  ...(process.env.BENCH_PLATFORMATIC_HWM
    ? { highWaterMark: Number(process.env.BENCH_PLATFORMATIC_HWM) }
    : {}),
});
stream.on('error', (e) => {
  console.error(e);
  process.exit(1);
});
stream.on('data', (m) => {
  const key = m.key ?? '';
  const v = JSON.parse(m.value!) as { seq: number };
  checksum = (checksum + v.seq + key.length) % 1_000_000_007;
  n++;
  if (n === 1) console.log(`FIRST ${performance.now()}`);
  if (n === p10) console.log(`P10 ${performance.now()}`);
  if (n === p90) console.log(`P90 ${performance.now()}`);
  if (!done && n >= records) {
    done = true;
    console.log(`DONE ${performance.now()} ${n} ${checksum}`);
  }
});
