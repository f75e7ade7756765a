import { OperatorError, SerdeError, SluiceError, safeString } from '../errors.js';
import type { Headers, InRecord } from '../kafka/types.js';
import type { Logger } from '../ops/logger.js';
import type { WorkerMetrics } from '../ops/metrics.js';
import type { ErrorPolicy } from '../topology/nodes.js';
import { emitsWithin } from './collector.js';
import type { Emitter } from './operators.js';
import type { DueTimer } from './task-state.js';

export type { ErrorPolicy } from '../topology/nodes.js';

/** Headers of a dead-letter record; consumers of `<appId>-dlq` can rely on these names. */
export const DLQ_HEADERS = {
  errorClass: 'sluice.error.class',
  errorMessage: 'sluice.error.message',
  errorKind: 'sluice.error.kind',
  topic: 'sluice.source.topic',
  partition: 'sluice.source.partition',
  offset: 'sluice.source.offset',
  timestamp: 'sluice.source.timestamp',
  /** The operator that threw (absent for deserialization errors). */
  operator: 'sluice.error.operator',
  /** A timer's dead letter (kind `timer`, key = the timer's key, no value): its time and domain. */
  timerTimestamp: 'sluice.timer.timestamp',
  timerDomain: 'sluice.timer.domain',
  /**
   * The record's value is left out (its size in bytes): the dead letter with it was larger than
   * the dead-letter topic takes. The record itself is at the source topic, partition and offset.
   */
  valueOmitted: 'sluice.value.omitted',
} as const;

/** The dead-letter copy of a record: its original bytes, plus headers naming what went wrong. */
export function deadLetterRecord(
  r: InRecord,
  err: Error,
  src: { topic: string; partition: number; kind: string; operator?: string | undefined },
): { key: Buffer | null; value: Buffer | null; headers: Headers } {
  const headers: Headers = { ...(r.headers ?? {}) };
  headers[DLQ_HEADERS.errorClass] = err.name || 'Error';
  headers[DLQ_HEADERS.errorMessage] = (err.message || String(err)).slice(0, 1000);
  headers[DLQ_HEADERS.errorKind] = src.kind;
  headers[DLQ_HEADERS.topic] = src.topic;
  headers[DLQ_HEADERS.partition] = String(src.partition);
  headers[DLQ_HEADERS.offset] = r.offset;
  headers[DLQ_HEADERS.timestamp] = r.timestamp;
  if (src.operator !== undefined) headers[DLQ_HEADERS.operator] = src.operator;
  else delete headers[DLQ_HEADERS.operator];
  return { key: r.key, value: r.value, headers };
}

/** What the error policy of a task needs: where the record came from, and where dead letters go. */
export interface DeadLetterContext {
  appId: string;
  partition: number;
  /** The app's policy (`processing.errorPolicy`); an operator's own `onError` wins over it. */
  policy: ErrorPolicy;
  logger: Logger;
  metrics: WorkerMetrics;
  emitter: Emitter;
  deadLetterTopic: string;
  /** Error signatures logged already (a bad record is logged once per kind). */
  seen: Set<string>;
}

/**
 * Applies the error policy to a record that failed to deserialize or in an operator: `fail`
 * throws (the worker fails), `skip` and `dlq` count and log it once per kind, `dlq` also
 * emits its dead-letter copy.
 */
export function applyErrorPolicy(c: DeadLetterContext, topic: string, r: InRecord, err: unknown): void {
  // An operator's own policy (`onError`) wins over the app's; the headers name the user's error.
  const op = err instanceof OperatorError ? err : undefined;
  const policy = op?.policy ?? c.policy;
  const cause = op ? op.cause : err;
  const kind = op || !(err instanceof SerdeError) ? 'operator' : 'deserialize';
  const e = cause instanceof Error ? cause : new Error(safeString(cause));
  if (policy === 'fail') {
    throw new SluiceError(
      'SLUICE_OPERATOR',
      `record ${topic}/${c.partition}@${r.offset} failed (${kind}${op ? ` in operator ${op.operator}` : ''}): ${e.message}`,
      { cause: e },
    );
  }
  const sig = `${kind}:${e.name}:${e.message.slice(0, 60)}`;
  if (!c.seen.has(sig)) {
    c.seen.add(sig);
    if (c.seen.size > 1000) c.seen.clear();
    c.logger.warn(
      { err: e, topic, partition: c.partition, offset: r.offset, policy, operator: op?.operator },
      `bad record (${kind}); logged once per kind`,
    );
  }
  c.metrics.recordsDeadLettered.inc({ app: c.appId, reason: kind });
  if (policy === 'dlq') {
    const d = deadLetterRecord(r, e, { topic, partition: c.partition, kind, operator: op?.operator });
    emitDeadLetter(c, d, Number(r.timestamp));
  }
}

/**
 * A dead letter larger than the dead-letter topic takes goes without its value, and then also
 * without its key and the record's own headers: the source topic, partition and offset name it.
 */
function emitDeadLetter(c: DeadLetterContext, d: ReturnType<typeof deadLetterRecord>, ts: number): void {
  const emit = () => emitsWithin(c.emitter, c.deadLetterTopic, d.key, d.value, ts, d.headers);
  if (emit()) return;
  if (d.value !== null) {
    d.headers[DLQ_HEADERS.valueOmitted] = String(d.value.length);
    d.value = null;
    if (emit()) return;
  }
  d.key = null;
  for (const k of Object.keys(d.headers)) if (!k.startsWith('sluice.')) delete d.headers[k];
  // A dead-letter topic that takes not even the headers: the record stays at its source offset.
  if (!emit())
    c.logger.error(
      { topic: c.deadLetterTopic },
      'a dead letter too large even without its key and value: not written',
    );
}

/**
 * Applies the error policy to a due timer whose `onTimer` threw (an `OperatorError`): `fail`
 * throws (the worker fails), `skip` and `dlq` count and log it once per kind, `dlq` also writes
 * a dead letter describing the timer (its key, no value, `sluice.error.kind: timer`, the
 * operator, the timer's time and domain). The caller has taken back the timer's outputs.
 */
export function applyTimerErrorPolicy(c: DeadLetterContext, t: DueTimer, err: OperatorError): void {
  applyNoInputErrorPolicy(
    c,
    {
      what: `timer of operator ${err.operator} at ${t.ts} (${t.domain} time)`,
      kind: 'timer',
      key: t.key.length === 0 ? null : Buffer.from(t.key),
      ts: t.ts,
      headers: { [DLQ_HEADERS.timerTimestamp]: String(t.ts), [DLQ_HEADERS.timerDomain]: t.domain },
      log: { timer: t.ts, domain: t.domain },
    },
    err,
  );
}

/**
 * Likewise for an aggregation's update held in the record cache (record-cache.ts) that failed
 * downstream when it was flushed: a dead letter with kind `cache`, the key as JSON, no value.
 */
export function applyCacheFlushErrorPolicy(
  c: DeadLetterContext,
  u: { key: unknown; timestamp: number; operator: string },
  err: OperatorError,
): void {
  const key = jsonKey(u.key);
  applyNoInputErrorPolicy(
    c,
    {
      what: `update of ${u.operator} flushed from the record cache, downstream in ${err.operator}`,
      kind: 'cache',
      key,
      ts: u.timestamp,
      headers: { [DLQ_HEADERS.timestamp]: String(u.timestamp) },
      log: { source: u.operator },
    },
    err,
  );
}

/**
 * Likewise for a record of an async stage whose function failed (threw, or timed out after its
 * retries) or whose effects failed downstream: the dead letter of its input record, as for a
 * throwing `map` (the error class `AsyncTimeoutError` for a timeout); for a record no input made
 * (a timer's or a flushed update's output), a dead letter of kind `async` with its key as JSON.
 */
export function applyAsyncErrorPolicy(
  c: DeadLetterContext,
  r: {
    key: unknown;
    rc: { topic: string; timestamp: number };
    raw: Pick<InRecord, 'key' | 'value' | 'offset' | 'timestamp' | 'headers'> | undefined;
  },
  err: OperatorError,
): void {
  if (r.raw) {
    applyErrorPolicy(c, r.rc.topic, r.raw, err);
    return;
  }
  applyNoInputErrorPolicy(
    c,
    {
      what: `a record of async operator ${err.operator} (made by a timer or a flush)`,
      kind: 'async',
      key: jsonKey(r.key),
      ts: r.rc.timestamp,
      headers: { [DLQ_HEADERS.timestamp]: String(r.rc.timestamp) },
      log: {},
    },
    err,
  );
}

function jsonKey(k: unknown): Buffer | null {
  if (k === null || k === undefined) return null;
  if (Buffer.isBuffer(k)) return k;
  try {
    return Buffer.from(JSON.stringify(k) ?? String(k));
  } catch {
    return Buffer.from(safeString(k));
  }
}

function applyNoInputErrorPolicy(
  c: DeadLetterContext,
  o: {
    what: string;
    kind: string;
    key: Buffer | null;
    ts: number;
    headers: Record<string, string>;
    log: Record<string, unknown>;
  },
  err: OperatorError,
): void {
  const policy = err.policy ?? c.policy;
  const cause = err.cause;
  const e = cause instanceof Error ? cause : new Error(safeString(cause));
  if (policy === 'fail')
    throw new SluiceError('SLUICE_OPERATOR', `${o.what} failed: ${e.message}`, { cause: e });
  c.metrics.errors.inc({ app: c.appId, kind: o.kind });
  const sig = `${o.kind}:${err.operator}:${e.name}:${e.message.slice(0, 60)}`;
  if (!c.seen.has(sig)) {
    c.seen.add(sig);
    if (c.seen.size > 1000) c.seen.clear();
    c.logger.warn(
      { err: e, operator: err.operator, ...o.log, policy },
      `${o.what} threw; logged once per kind`,
    );
  }
  if (policy !== 'dlq') return;
  const headers: Headers = {
    [DLQ_HEADERS.errorClass]: e.name || 'Error',
    [DLQ_HEADERS.errorMessage]: (e.message || String(e)).slice(0, 1000),
    [DLQ_HEADERS.errorKind]: o.kind,
    [DLQ_HEADERS.operator]: err.operator,
    ...o.headers,
    [DLQ_HEADERS.partition]: String(c.partition),
  };
  c.emitter.emit(c.deadLetterTopic, o.key, null, o.ts, headers);
}
