/**
 * The demo: a local Kafka, the page-views job, a load generator and a live view of the output.
 *
 *   npm run demo                     # Ctrl-C to stop
 *   node dist/scripts/demo.js [--duration <s>] [--http-port <port>] [--rate <records/s>] [--seed <n>]
 *
 * Uses KAFKA_BROKERS when set, else starts (or reuses) the local Kafka on 127.0.0.1:9092 and stops
 * it at the end if this run started it. App id: DEMO_APP_ID or `page-views`; topics: DEMO_CLICKS_TOPIC
 * or `clicks`, DEMO_PAGE_VIEWS_TOPIC or `page-views`. State lives in <tmpdir>/sluice-demo.
 */
// First: Sluice patches kafkajs before kafkajs loads (this script and the load generator use
// kafkajs themselves, and ES imports are evaluated in order).
import 'sluice';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type Consumer, Kafka, logLevel } from 'kafkajs';
import { loadConfig, type RunningWorker, startWorker } from 'sluice';
import { generateClicks } from '../examples/load-generator.js';
import { type PageViews, pageViewsApp } from '../examples/page-views.js';
import { type LocalKafka, startLocalKafka, stopLocalKafka } from '../src/dev/local-kafka.js';

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

const PARTITIONS = 4;

function say(msg: string): void {
  process.stdout.write(`${msg}\n`);
}

function options() {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string' },
      'http-port': { type: 'string', default: '9464' },
      rate: { type: 'string', default: '200' },
      seed: { type: 'string', default: '1' },
    },
  });
  const num = (name: string, v: string | undefined, min: number) => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < min) {
      throw new Error(`--${name} expects a number >= ${min}, got ${JSON.stringify(v)}`);
    }
    return n;
  };
  return {
    durationSec: num('duration', values.duration, 1),
    httpPort: num('http-port', values['http-port'], 0)!,
    rate: num('rate', values.rate, 1)!,
    seed: num('seed', values.seed, 0)!,
  };
}

async function ensureTopics(kafka: Kafka, topics: string[]): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const missing = topics.filter((t) => !existing.has(t));
    if (missing.length > 0) {
      await admin.createTopics({
        waitForLeaders: true,
        topics: missing.map((topic) => ({ topic, numPartitions: PARTITIONS })),
      });
      say(`created topics ${missing.join(', ')} (${PARTITIONS} partitions)`);
    }
  } finally {
    await admin.disconnect();
  }
}

/** Follows the output topic (read_committed) and keeps the latest count of every page. */
async function watchOutput(kafka: Kafka, topic: string, appId: string) {
  const views = new Map<string, number>();
  let updates = 0;
  const groupId = `${appId}-demo-viewer-${randomBytes(4).toString('hex')}`;
  const consumer: Consumer = kafka.consumer({
    groupId,
    maxWaitTimeInMs: 200,
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: false });
  await consumer.run({
    eachBatch: async ({ batch }) => {
      for (const m of batch.messages) {
        if (!m.value) continue;
        try {
          const v = JSON.parse(m.value.toString()) as PageViews;
          if (typeof v.page === 'string' && typeof v.views === 'number') {
            views.set(v.page, Math.max(v.views, views.get(v.page) ?? 0));
            updates++;
          }
        } catch {
          // not ours
        }
      }
    },
  });
  /** Leaves the group and deletes it (it only ever served this run). */
  const close = async () => {
    await consumer.disconnect().catch(() => undefined);
    const admin = kafka.admin();
    await admin
      .connect()
      .then(() => admin.deleteGroups([groupId]))
      .catch(() => undefined)
      .finally(() => admin.disconnect());
  };
  return { views, updates: () => updates, close };
}

async function main(): Promise<number> {
  const opts = options();
  const appId = process.env.DEMO_APP_ID || 'page-views';
  const input = process.env.DEMO_CLICKS_TOPIC || 'clicks';
  const output = process.env.DEMO_PAGE_VIEWS_TOPIC || 'page-views';

  const stop = new AbortController();
  let exitCode = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    if (stop.signal.aborted) {
      say(`${sig} again: exiting now`);
      process.exit(130);
    }
    say(`\n${sig}: stopping (again to force)`);
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  /** Thrown to skip the remaining start-up steps once a signal asked to stop. */
  const stopped = new Error('stopped');
  const bailIfStopped = () => {
    if (stop.signal.aborted) throw stopped;
  };

  let local: LocalKafka | undefined;
  let worker: RunningWorker | undefined;
  let closeViewer: (() => Promise<void>) | undefined;
  let generator: Promise<unknown> | undefined;
  let ticker: NodeJS.Timeout | undefined;
  try {
    local = await startLocalKafka({ log: (m) => say(m) });
    const brokers = local.brokers;
    say(
      local.version === 'external'
        ? `using Kafka at ${brokers.join(',')} (KAFKA_BROKERS)`
        : `Kafka ${local.version} at ${brokers.join(',')}${local.alreadyRunning ? ' (already running; left running at exit)' : ''}`,
    );
    bailIfStopped();

    const kafka = new Kafka({ clientId: 'sluice-demo', brokers, logLevel: logLevel.NOTHING });
    await ensureTopics(kafka, [input, output]);
    bailIfStopped();

    const config = loadConfig({
      overrides: {
        state: { dir: join(tmpdir(), 'sluice-demo') },
        log: { level: 'warn' },
        // Ctrl-C ends the demo for good: leave the group rather than keep the static member's
        // place for a restart.
        kafka: { leaveGroupOnClose: true },
      },
      flags: [
        ['kafka.brokers', brokers.join(',')],
        ['http.port', String(opts.httpPort)],
      ],
    });
    const app = pageViewsApp({ id: appId, input, output });
    say(`starting worker of ${appId}: ${input} -> filter bots -> keyBy page -> count -> ${output}`);
    worker = await startWorker(app, config, {
      onFatal: (e) => {
        say(`worker failed: ${e.message}`);
        exitCode = 1;
        stop.abort();
      },
    });
    bailIfStopped();
    if (worker.http) {
      say(`metrics: ${worker.http.url}/metrics   (also /healthz, /readyz, /status)`);
    }

    const watch = await watchOutput(kafka, output, appId);
    closeViewer = watch.close;

    let sent = 0;
    say(
      `producing ~${opts.rate} clicks/s to ${input} (seed ${opts.seed})${opts.durationSec ? ` for ${opts.durationSec} s` : '; Ctrl-C to stop'}`,
    );
    generator = generateClicks({
      brokers,
      topic: input,
      ratePerSec: opts.rate,
      seed: opts.seed,
      signal: stop.signal,
      onProgress: (n) => {
        sent = n;
      },
    }).catch((e: Error) => {
      say(`load generator failed: ${e.message}`);
      exitCode = 1;
      stop.abort();
    });

    const started = Date.now();
    let lastSent = 0;
    let lastUpdates = 0;
    ticker = setInterval(() => {
      const updates = watch.updates();
      const top = [...watch.views]
        .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
        .slice(0, 5)
        .map(([page, n]) => `${page} ${n}`)
        .join(', ');
      const t = ((Date.now() - started) / 1000).toFixed(0).padStart(3);
      say(
        `[${t}s] clicks in ${sent} (+${sent - lastSent}/s)  page-views out ${updates} (+${updates - lastUpdates}/s)  top pages: ${top || '(waiting for output)'}`,
      );
      lastSent = sent;
      lastUpdates = updates;
    }, 1000);

    if (opts.durationSec !== undefined) {
      const timer = setTimeout(() => stop.abort(), opts.durationSec * 1000);
      stop.signal.addEventListener('abort', () => clearTimeout(timer), { once: true });
    }
    await new Promise<void>((resolve) => {
      if (stop.signal.aborted) resolve();
      else stop.signal.addEventListener('abort', () => resolve(), { once: true });
    });
  } catch (e) {
    if (e !== stopped) {
      say(`demo failed: ${e instanceof Error ? e.message : String(e)}`);
      exitCode = 1;
    }
  } finally {
    stop.abort();
    if (ticker) clearInterval(ticker);
    await generator;
    await closeViewer?.();
    if (worker) {
      say('stopping the worker (checkpoint, leave the group)');
      await worker.stop().catch((e: Error) => {
        say(`worker stop failed: ${e.message}`);
        exitCode = 1;
      });
    }
    if (local && !local.alreadyRunning) {
      say('stopping the local Kafka started by the demo');
      await stopLocalKafka().catch((e: Error) => say(`stopping Kafka failed: ${e.message}`));
    }
  }
  say(`demo stopped${exitCode === 0 ? '' : ' with errors'}`);
  return exitCode;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    say(`demo failed: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  },
);
