import type { RecordContext } from '../api/context.js';
import type { Serde } from '../api/serdes.js';
import type { InRecord } from '../kafka/types.js';

/**
 * The one mutable record context of a task. The task sets its fields before pushing a record
 * through the operators, which hand it to user functions: no allocation per record.
 */
export class MutableRecordContext implements RecordContext<unknown> {
  key: unknown = null;
  topic = '';
  partition = 0;
  offset = '0';
  timestamp = 0;
  headers: Record<string, unknown> | undefined = undefined;
  /** The task's watermark (undefined until every stream input has a record). */
  watermark: number | undefined = undefined;
  /** The input record being processed (an async stage keeps it for a dead letter); none in a timer. */
  raw: InRecord | undefined = undefined;
  /**
   * The bytes of the key last serialized for the state (`process`), and under which serde
   * (fingerprint), so that a sink writing that same key with a serde of the same format takes
   * them instead of serializing it again. Only primitive keys and the deterministic built-in
   * formats (see {@link memoKeyBytes}).
   */
  readonly keyMemo: { key: unknown; format: string; bytes: Buffer } = {
    key: undefined,
    format: '',
    bytes: Buffer.alloc(0),
  };
  /** The wall clock: `Date.now`, or a test driver's own (processing time, processing-time timers). */
  now: () => number = Date.now;
}

/** Serde fingerprints whose bytes depend only on the (primitive) value: the built-in formats. */
const MEMO_FORMATS = new Set(['string', 'number', 'json']);

/** The format under which a serde's bytes may be memoized, or '' (none). */
export function memoFormat(fingerprint: string | undefined): string {
  return fingerprint !== undefined && MEMO_FORMATS.has(fingerprint) ? fingerprint : '';
}

/** The bytes of `key` remembered under `format`, or else `serde`'s serialization of it. */
export function keyBytesOf(
  rc: MutableRecordContext,
  key: unknown,
  format: string,
  serde: Serde<unknown>,
): Buffer | null {
  const m = rc.keyMemo;
  return format !== '' && m.key === key && m.format === format ? m.bytes : serde.serialize(key);
}

/** Remembers `bytes` as the serialization of `key` under `format` (when both allow it). */
export function memoKeyBytes(rc: MutableRecordContext, key: unknown, format: string, bytes: Buffer): void {
  if (format === '' || (typeof key !== 'string' && typeof key !== 'number')) return;
  const m = rc.keyMemo;
  m.key = key;
  m.format = format;
  m.bytes = bytes;
}

/**
 * Whether UTF-8 bytes start with a byte order mark, which the string serde's decoder drops: such
 * a key's bytes are not what the decoded string serializes to.
 */
export function startsWithBom(b: Buffer): boolean {
  return b.length >= 3 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf;
}
