/**
 * A small, deterministic load generator: JSON clicks `{user, page, bot, ts}` keyed by user, at a
 * steady rate. The same seed gives the same users, pages and bot flags in the same order (only
 * `ts`, the wall clock at send time, differs between runs).
 *
 *   node dist/examples/load-generator.js --rate 200 --count 10000 --brokers 127.0.0.1:9092
 *   options: --topic clicks --rate <records/s> --count <n> --duration <s> --seed <n> --brokers <h:p,...>
 *            --partitions <n> (of the topic, when the generator has to create it; default 4)
 *
 * Without --count or --duration it runs until Ctrl-C. Brokers default to KAFKA_BROKERS, then
 * 127.0.0.1:9092. A missing topic is created (the local broker does not create topics on use).
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Kafka, logLevel } from 'kafkajs';
import type { Click } from './page-views.js';
import { prng } from './prng.js';

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

export interface GenerateClicksOptions {
  brokers: string[];
  topic: string;
  /** Records per second (> 0). */
  ratePerSec: number;
  /** Stop after this many seconds. */
  durationSec?: number;
  /** Stop after this many records. */
  count?: number;
  /** Default 1. */
  seed?: number;
  /** Stops the generator (it resolves normally, after the batch in flight). */
  signal?: AbortSignal;
  /** Called after each batch with the running total. */
  onProgress?: (sent: number) => void;
  /** Partitions of the topic if it has to be created. Default 4. */
  partitions?: number;
}

export interface GenerateClicksResult {
  sent: number;
  elapsedMs: number;
}

export const PAGES = [
  '/',
  '/pricing',
  '/docs',
  '/docs/getting-started',
  '/docs/api',
  '/docs/operations',
  '/blog',
  '/blog/exactly-once',
  '/blog/load-shedding',
  '/about',
  '/careers',
  '/contact',
  '/login',
  '/signup',
  '/download',
  '/changelog',
  '/community',
  '/security',
  '/status',
  '/terms',
];
const USERS = 1000;
const BOT_SHARE = 0.05;

export { prng };

/**
 * An endless, deterministic sequence of clicks. Pages follow a Zipf-like law (a few pages get most
 * views), users are uniform, about 5% of clicks are bots.
 */
export function* clicks(seed = 1, now: () => number = Date.now): Generator<Click> {
  const rand = prng(seed);
  const weights = PAGES.map((_, i) => 1 / (i + 1));
  const total = weights.reduce((a, b) => a + b, 0);
  const cumulative: number[] = [];
  let acc = 0;
  for (const w of weights) cumulative.push((acc += w / total));
  for (;;) {
    const r = rand();
    let p = cumulative.findIndex((c) => r < c);
    if (p < 0) p = PAGES.length - 1;
    const user = `u${Math.floor(rand() * USERS)
      .toString()
      .padStart(4, '0')}`;
    const bot = rand() < BOT_SHARE;
    yield { user, page: PAGES[p]!, bot, ts: now() };
  }
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

/**
 * Produces clicks at `ratePerSec` (in batches every 50 ms) until `count` records, `durationSec`
 * seconds or the signal, whichever comes first; unbounded when none is given.
 * @example await generateClicks({ brokers: ['127.0.0.1:9092'], topic: 'clicks', ratePerSec: 200, count: 1000 });
 */
export async function generateClicks(opts: GenerateClicksOptions): Promise<GenerateClicksResult> {
  if (!(opts.ratePerSec > 0)) throw new Error(`ratePerSec must be > 0, got ${opts.ratePerSec}`);
  const kafka = new Kafka({
    clientId: 'sluice-load-generator',
    brokers: opts.brokers,
    logLevel: logLevel.NOTHING,
  });
  await ensureTopic(kafka, opts.topic, opts.partitions ?? 4);
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const source = clicks(opts.seed ?? 1);
  const limit = opts.count ?? Number.POSITIVE_INFINITY;
  const deadline =
    opts.durationSec !== undefined ? Date.now() + opts.durationSec * 1000 : Number.POSITIVE_INFINITY;
  const start = Date.now();
  let sent = 0;
  try {
    while (sent < limit && !opts.signal?.aborted && Date.now() < deadline) {
      const due = Math.min(limit, Math.floor(((Date.now() - start) / 1000) * opts.ratePerSec) + 1);
      const n = due - sent;
      if (n > 0) {
        const messages = [];
        for (let i = 0; i < n; i++) {
          const c = source.next().value as Click;
          messages.push({ key: c.user, value: JSON.stringify(c) });
        }
        await producer.send({ topic: opts.topic, messages });
        sent += n;
        opts.onProgress?.(sent);
      }
      if (sent < limit) await sleep(50, opts.signal);
    }
  } finally {
    await producer.disconnect();
  }
  return { sent, elapsedMs: Date.now() - start };
}

/** Creates `topic` when it does not exist yet (racing another creator is fine). */
async function ensureTopic(kafka: Kafka, topic: string, partitions: number): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    // false: it exists already.
    if (await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: partitions }] }))
      console.log(`created topic ${topic} (${partitions} partitions)`);
  } finally {
    await admin.disconnect();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      brokers: { type: 'string' },
      topic: { type: 'string', default: 'clicks' },
      rate: { type: 'string', default: '200' },
      count: { type: 'string' },
      duration: { type: 'string' },
      seed: { type: 'string', default: '1' },
      partitions: { type: 'string', default: '4' },
    },
  });
  const brokers = (values.brokers ?? process.env.KAFKA_BROKERS ?? '127.0.0.1:9092')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const num = (name: string, v: string | undefined) => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} expects a non-negative number, got ${v}`);
    return n;
  };
  const abort = new AbortController();
  process.once('SIGINT', () => abort.abort());
  process.once('SIGTERM', () => abort.abort());
  const ratePerSec = num('rate', values.rate)!;
  const topic = values.topic!;
  console.log(`producing clicks to ${topic} at ${ratePerSec}/s on ${brokers.join(',')}`);
  let reported = Date.now();
  const r = await generateClicks({
    brokers,
    topic,
    ratePerSec,
    count: num('count', values.count),
    durationSec: num('duration', values.duration),
    seed: num('seed', values.seed),
    partitions: num('partitions', values.partitions),
    signal: abort.signal,
    onProgress: (sent) => {
      if (Date.now() - reported >= 5000) {
        reported = Date.now();
        console.log(`${sent} sent`);
      }
    },
  });
  console.log(`sent ${r.sent} clicks in ${(r.elapsedMs / 1000).toFixed(1)} s`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((e) => {
    console.error(e instanceof Error ? e.message : e);
    process.exit(1);
  });
}
