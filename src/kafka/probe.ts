import './kafkajs-preload.js';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, logLevel } from 'kafkajs';
import { SluiceError } from '../errors.js';
import { withTimeout } from './timeout.js';

/** Options for {@link probeBroker}. */
export interface ProbeOptions {
  /** Give up after this long (default 90 000 ms). */
  timeoutMs?: number;
  /** Stop probing early, e.g. because the broker process exited. */
  signal?: AbortSignal;
}

/**
 * The steps a probe walks through, in order. A freshly started broker answers metadata first, then
 * creates topics, and only a second or two later finishes loading `__consumer_offsets` and
 * `__transaction_state`; until then the coordinators answer COORDINATOR_LOAD_IN_PROGRESS.
 */
const STAGES = ['metadata', 'create topic', 'group coordinator', 'transaction coordinator'] as const;
type Stage = (typeof STAGES)[number];

/** What earlier attempts achieved, so a retry does not redo it; `stage` is where the last one failed. */
interface Progress {
  stage: Stage;
  topicCreated: boolean;
  groupsReady: boolean;
  transactionsReady: boolean;
}

/*
 * Why these numbers: one attempt must fail fast enough that the outer loop, not kafkajs's own retry,
 * paces the probing (a broker that is still binding its port refuses connections at once), yet a
 * coordinator that is loading needs a few seconds. Backoff starts at 100 ms because a local broker
 * usually becomes ready between two attempts, and is capped at 1 s so readiness is seen within a
 * second of happening.
 */
const CONNECTION_TIMEOUT_MS = 1_000;
const REQUEST_TIMEOUT_MS = 5_000;
const ATTEMPT_TIMEOUT_MS = 15_000;
const FIRST_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 1_000;
const DEFAULT_TIMEOUT_MS = 90_000;

/**
 * Resolves once the cluster at `brokers` can do everything Sluice needs: it answers metadata,
 * creates (and deletes) a topic, has a working group coordinator and a working transaction
 * coordinator (a one-record transaction is committed). Retries with backoff until `timeoutMs`,
 * then throws a `SluiceError` (code `SLUICE_KAFKA`) naming the stage that failed and its last cause.
 *
 * @example
 * await probeBroker(['127.0.0.1:9092'], { timeoutMs: 30_000 });
 */
export async function probeBroker(brokers: string[], opts: ProbeOptions = {}): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const deadline = Date.now() + timeoutMs;
  const suffix = `${process.pid}-${randomBytes(4).toString('hex')}`;
  const names = {
    topic: `sluice-probe-${suffix}`,
    group: `sluice-probe-${suffix}`,
    transactionalId: `sluice-probe-${suffix}`,
  };
  const progress: Progress = {
    stage: STAGES[0],
    topicCreated: false,
    groupsReady: false,
    transactionsReady: false,
  };
  let lastError: unknown;
  let backoff = FIRST_BACKOFF_MS;
  try {
    for (;;) {
      opts.signal?.throwIfAborted();
      const remaining = deadline - Date.now();
      const before = score(progress);
      try {
        await withTimeout(
          attempt(brokers, names, progress),
          Math.min(remaining, ATTEMPT_TIMEOUT_MS),
          noAnswer,
        );
        return;
      } catch (err) {
        lastError = err;
      }
      // Backing off is for a broker that is not moving; one that got further is retried promptly.
      if (score(progress) > before) backoff = FIRST_BACKOFF_MS;
      const wait = Math.min(backoff, deadline - Date.now());
      if (wait <= 0) break;
      await sleep(wait, undefined, { signal: opts.signal });
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
  } finally {
    // When aborted the broker is going away; deleting would only wait for it.
    if (progress.topicCreated && !opts.signal?.aborted) await deleteProbeTopic(brokers, names.topic);
  }
  throw new SluiceError(
    'SLUICE_KAFKA',
    `Kafka at ${brokers.join(',')} was not ready after ${timeoutMs} ms ` +
      `(stuck at ${progress.stage}: ${describe(lastError)})`,
    { cause: lastError, retriable: true },
  );
}

/**
 * A quick check for status displays: does any of `brokers` answer a metadata request within
 * `timeoutMs`? Never throws.
 *
 * @example
 * if (!(await brokerAnswers(['127.0.0.1:9092'], 2_000))) console.log('not running');
 */
export async function brokerAnswers(brokers: string[], timeoutMs: number): Promise<boolean> {
  const admin = client(brokers, Math.min(timeoutMs, REQUEST_TIMEOUT_MS)).admin();
  try {
    await withTimeout(
      (async () => {
        await admin.connect();
        await admin.describeCluster();
      })(),
      timeoutMs,
      noAnswer,
    );
    return true;
  } catch {
    return false;
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

function score(p: Progress): number {
  return (
    STAGES.indexOf(p.stage) + Number(p.topicCreated) + Number(p.groupsReady) + Number(p.transactionsReady)
  );
}

async function attempt(
  brokers: string[],
  names: { topic: string; group: string; transactionalId: string },
  progress: Progress,
): Promise<void> {
  const kafka = client(brokers, REQUEST_TIMEOUT_MS);
  const admin = kafka.admin();
  const producer = kafka.producer({
    transactionalId: names.transactionalId,
    idempotent: true,
    maxInFlightRequests: 1,
    // kafkajs refuses an idempotent producer without retries.
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 500 },
  });
  try {
    progress.stage = 'metadata';
    await admin.connect();
    await admin.describeCluster();

    progress.stage = 'create topic';
    if (!progress.topicCreated) {
      await admin.createTopics({
        topics: [{ topic: names.topic, numPartitions: 1, replicationFactor: 1 }],
        waitForLeaders: true,
        timeout: REQUEST_TIMEOUT_MS,
      });
      progress.topicCreated = true;
    }

    // The coordinators load their internal topics (created on first use) independently: check both at once.
    const checks: Array<[Stage, () => Promise<void>]> = [];
    if (!progress.groupsReady) {
      checks.push([
        'group coordinator',
        async () => {
          // OffsetFetch is served only once the coordinator has loaded its __consumer_offsets partition.
          await admin.fetchOffsets({ groupId: names.group, topics: [names.topic] });
          progress.groupsReady = true;
        },
      ]);
    }
    if (!progress.transactionsReady) {
      checks.push([
        'transaction coordinator',
        async () => {
          await producer.connect();
          const txn = await producer.transaction();
          try {
            await txn.send({ topic: names.topic, messages: [{ key: 'probe', value: 'probe' }] });
            await txn.commit();
          } catch (err) {
            await txn.abort().catch(() => {});
            throw err;
          }
          progress.transactionsReady = true;
        },
      ]);
    }
    if (checks.length > 0) progress.stage = checks[0]![0];
    const results = await Promise.allSettled(checks.map(([, check]) => check()));
    const failed = results.findIndex((r) => r.status === 'rejected');
    if (failed >= 0) {
      progress.stage = checks[failed]![0];
      throw (results[failed] as PromiseRejectedResult).reason;
    }
  } finally {
    await producer.disconnect().catch(() => {});
    await admin.disconnect().catch(() => {});
  }
}

async function deleteProbeTopic(brokers: string[], topic: string): Promise<void> {
  const admin = client(brokers, REQUEST_TIMEOUT_MS).admin();
  try {
    await withTimeout(
      (async () => {
        await admin.connect();
        await admin.deleteTopics({ topics: [topic], timeout: REQUEST_TIMEOUT_MS });
      })(),
      REQUEST_TIMEOUT_MS,
      noAnswer,
    );
  } catch {
    // Best effort: a leftover probe topic is harmless, and a broker that was never ready has none.
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

function client(brokers: string[], requestTimeout: number): Kafka {
  return new Kafka({
    clientId: 'sluice-probe',
    brokers,
    // kafkajs logs every refused connection at ERROR; while probing those are expected.
    logLevel: logLevel.NOTHING,
    connectionTimeout: CONNECTION_TIMEOUT_MS,
    requestTimeout,
    retry: { retries: 1, initialRetryTime: 100, maxRetryTime: 500 },
  });
}

const noAnswer = (ms: number) => new Error(`no answer within ${ms} ms`);

function describe(err: unknown): string {
  if (err instanceof Error) {
    const inner = err.cause instanceof Error ? err.cause.message : '';
    const cause = inner && !err.message.includes(inner) ? ` (${inner})` : '';
    return `${err.message}${cause}`;
  }
  return err === undefined ? 'no attempt finished' : String(err);
}

/**
 * How many brokers the cluster at `brokers` lists as live in its metadata, or undefined when none
 * answers within `timeoutMs`. Never throws.
 */
export async function liveBrokerCount(brokers: string[], timeoutMs: number): Promise<number | undefined> {
  const admin = client(brokers, Math.min(timeoutMs, REQUEST_TIMEOUT_MS)).admin();
  try {
    return await withTimeout(
      (async () => {
        await admin.connect();
        return (await admin.describeCluster()).brokers.length;
      })(),
      timeoutMs,
      noAnswer,
    );
  } catch {
    return undefined;
  } finally {
    await admin.disconnect().catch(() => {});
  }
}
