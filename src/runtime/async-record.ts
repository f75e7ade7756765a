import { deserialize, serialize } from 'node:v8';
import { SluiceError, safeString } from '../errors.js';
import type { InRecord } from '../kafka/types.js';

/** A record in an async stage and how a checkpoint stores it (async-stage.ts). */

/** The worker-wide bound on the bytes of records held in async stages (`processing.asyncMaxBytes`). */
export class AsyncBudget {
  bytes = 0;
  readonly max: number;
  constructor(max: number) {
    this.max = max;
  }
  get full(): boolean {
    return this.bytes >= this.max;
  }
}

/** What a record carries through an async stage: its context when it entered, for its outputs. */
export interface AsyncRecordContext {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly timestamp: number;
  readonly headers: Readonly<Record<string, unknown>> | undefined;
}

/** One record in an async stage. */
export interface InFlight {
  readonly seq: number;
  readonly key: unknown;
  readonly value: unknown;
  readonly rc: AsyncRecordContext;
  /** The input record it came from (a dead letter's bytes), unless a timer or flush made it. */
  readonly raw: Pick<InRecord, 'key' | 'value' | 'timestamp' | 'headers' | 'offset'> | undefined;
  state: 'waiting' | 'running' | 'done';
  /** What the user function gave (its result; for an async process, its buffered effects). */
  result: unknown;
  error: unknown;
  /** Stored by a checkpoint (in the stage's store): a later checkpoint deletes it once it left. */
  persisted: boolean;
  readonly bytes: number;
  readonly enteredAt: number;
}

/** The error of an attempt that took longer than `timeoutMs`. */
export class AsyncTimeoutError extends Error {
  constructor(operator: string, ms: number) {
    super(`async operator ${operator} timed out after ${ms} ms`);
    this.name = 'AsyncTimeoutError';
  }
}

export const NO_RESULT = Symbol('no result');

/** A store key: the sequence number, 8 bytes big-endian, so a scan returns input order. */
export function seqKey(seq: number): Buffer {
  const b = Buffer.allocUnsafe(8);
  b.writeBigUInt64BE(BigInt(seq));
  return b;
}

/** An identity for a key in a Map: strings and numbers as they are, anything else by its JSON. */
export function keyId(k: unknown): unknown {
  if (k === null || k === undefined || typeof k === 'string' || typeof k === 'number') return k;
  if (Buffer.isBuffer(k)) return `\0b${k.toString('latin1')}`;
  try {
    return `\0j${JSON.stringify(k)}`;
  } catch {
    return `\0s${safeString(k)}`;
  }
}

export function encodeInFlight(r: InFlight, operator: string): Buffer {
  try {
    return serialize([r.key, r.value, r.rc, r.raw ?? null]);
  } catch (e) {
    throw new SluiceError(
      'SLUICE_OPERATOR',
      `async operator ${operator}: a record in flight at a checkpoint cannot be stored (v8.serialize: ${
        (e as Error).message
      }); values entering an async stage must be plain data (no functions, no class instances with private state)`,
      { cause: e },
    );
  }
}

export function decodeInFlight(k: Buffer, v: Buffer): InFlight {
  const [key, value, rc, raw] = deserialize(v) as [
    unknown,
    unknown,
    AsyncRecordContext,
    InFlight['raw'] | null,
  ];
  return {
    seq: Number(k.readBigUInt64BE(0)),
    key,
    value,
    rc,
    raw: raw ?? undefined,
    state: 'waiting',
    result: NO_RESULT,
    error: undefined,
    persisted: true,
    bytes: v.length + 128,
    enteredAt: performance.now(),
  };
}
