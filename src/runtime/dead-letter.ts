import type { Headers, InRecord } from '../kafka/types.js';

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
