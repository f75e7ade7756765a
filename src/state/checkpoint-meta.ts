import { createHash } from 'node:crypto';
import { CheckpointMetaError } from './errors.js';

/**
 * The last changelog record a task wrote (or replayed) for one store. It names the changelog
 * incarnation the local state belongs to: kafkajs does not expose topic ids, so a changelog
 * deleted and recreated is recognised by this record no longer being at its offset.
 */
export interface ChangelogFingerprint {
  /** Offset of the record (decimal string). */
  offset: string;
  /** Its timestamp, epoch milliseconds as a decimal string (the task sets it: CreateTime). */
  timestamp: string;
  /** SHA-256 of its key and value (hex, 32 characters); see {@link recordHash}. */
  hash: string;
}

/** A changelog record as the fingerprint sees it (a fetched record, or one just written). */
export interface ChangelogRecordView {
  offset: string | bigint;
  timestamp: string;
  key: Buffer | null;
  value: Buffer | null;
}

/**
 * What a task's local state reflects, stored in the same RocksDB batch as the state itself
 * (column family `__meta`, key `checkpoint`). Recovery replays each changelog from
 * `changelogOffsets[store]`; a stored offset outside the changelog's range, or a changelog whose
 * record at `changelogLast[store].offset` is not the one fingerprinted, means the changelog was
 * recreated: wipe and rebuild.
 *
 * Offsets are decimal strings (Kafka offsets are int64; kafkajs hands them over as strings).
 * Input offsets are not kept here: a task reads them from the group (they are committed in the
 * checkpoint's transaction). Entries written by earlier versions carry an `inputOffsets` field,
 * which nothing read; it is dropped like any unknown field.
 */
export interface CheckpointMeta {
  version: 1;
  /** Store name → next changelog offset to replay from (last offset written + 1). */
  changelogOffsets: Record<string, string>;
  /**
   * Store name → the last changelog record this folder holds (absent in entries written before
   * fingerprints existed, and for a store whose changelog partition is still empty).
   */
  changelogLast?: Record<string, ChangelogFingerprint>;
  /** Epoch milliseconds when the checkpoint was written. */
  writtenAt: number;
}

const OFFSET = /^(0|[1-9][0-9]{0,18})$/;
const MAX_OFFSET = 9223372036854775807n;

/**
 * Encodes the meta entry as JSON bytes, validating it first.
 *
 * @example
 * const meta = encodeCheckpointMeta({
 *   version: 1,
 *   changelogOffsets: { counts: '1042' },
 *   writtenAt: Date.now(),
 * });
 * @throws TypeError when a field is invalid (a bug in the caller).
 */
export function encodeCheckpointMeta(meta: CheckpointMeta): Buffer {
  let valid: CheckpointMeta;
  try {
    valid = validate(meta);
  } catch (err) {
    throw new TypeError((err as Error).message);
  }
  return Buffer.from(JSON.stringify(valid));
}

/**
 * Decodes and validates a stored meta entry. Unknown fields are dropped (a newer minor writer).
 *
 * @throws CheckpointMetaError when it is not a valid version-1 entry: treat the task's state as
 * corrupted (wipe and restore from the changelogs).
 */
export function decodeCheckpointMeta(bytes: Buffer): CheckpointMeta {
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw new CheckpointMetaError(`not JSON (${(err as Error).message})`);
  }
  return validate(parsed);
}

function validate(input: unknown): CheckpointMeta {
  if (!isObject(input)) throw new CheckpointMetaError('not an object');
  if (input.version !== 1)
    throw new CheckpointMetaError(`unsupported version ${JSON.stringify(input.version)}`);
  const writtenAt = input.writtenAt;
  if (typeof writtenAt !== 'number' || !Number.isFinite(writtenAt) || writtenAt < 0) {
    throw new CheckpointMetaError(
      `writtenAt must be a non-negative number, got ${JSON.stringify(writtenAt)}`,
    );
  }
  const meta: CheckpointMeta = {
    version: 1,
    changelogOffsets: record(input.changelogOffsets, 'changelogOffsets', isStoreKey, isOffset),
    writtenAt,
  };
  if (input.changelogLast !== undefined) meta.changelogLast = fingerprints(input.changelogLast);
  return meta;
}

const TIMESTAMP = /^(0|-?[1-9][0-9]{0,18})$/;
const HASH = /^[0-9a-f]{32}$/;

function fingerprints(value: unknown): Record<string, ChangelogFingerprint> {
  if (!isObject(value)) throw new CheckpointMetaError('changelogLast must be an object');
  const entries: Array<[string, ChangelogFingerprint]> = [];
  for (const [k, v] of Object.entries(value)) {
    if (!isStoreKey(k))
      throw new CheckpointMetaError(`changelogLast has an invalid key ${JSON.stringify(k)}`);
    if (
      !isObject(v) ||
      typeof v.offset !== 'string' ||
      !isOffset(v.offset) ||
      typeof v.timestamp !== 'string' ||
      !TIMESTAMP.test(v.timestamp) ||
      typeof v.hash !== 'string' ||
      !HASH.test(v.hash)
    ) {
      throw new CheckpointMetaError(`changelogLast[${JSON.stringify(k)}] is invalid: ${JSON.stringify(v)}`);
    }
    entries.push([k, { offset: v.offset, timestamp: v.timestamp, hash: v.hash }]);
  }
  return Object.fromEntries(entries);
}

/**
 * SHA-256 (first 128 bits, hex) of a record's key and value, each length-prefixed so that a null
 * differs from an empty buffer and bytes cannot move between key and value.
 */
export function recordHash(key: Buffer | null, value: Buffer | null): string {
  const h = createHash('sha256');
  for (const part of [key, value]) {
    const len = Buffer.alloc(4);
    len.writeInt32BE(part === null ? -1 : part.length);
    h.update(len);
    if (part !== null) h.update(part);
  }
  return h.digest('hex').slice(0, 32);
}

/** The fingerprint of one changelog record. */
export function fingerprintOf(rec: ChangelogRecordView): ChangelogFingerprint {
  return { offset: rec.offset.toString(), timestamp: rec.timestamp, hash: recordHash(rec.key, rec.value) };
}

/**
 * Compares a stored fingerprint with the first record the changelog returned when read from the
 * fingerprint's offset. Returns why they differ, or undefined when it is the same record.
 *
 * @example
 * const why = fingerprintMismatch(meta.changelogLast.counts, fetched[0]);
 * if (why) wipeAndRestore(why);
 */
export function fingerprintMismatch(
  fp: ChangelogFingerprint,
  found: ChangelogRecordView | undefined,
): string | undefined {
  if (found === undefined) return `no record at offset ${fp.offset} (compacted away or never written)`;
  const offset = found.offset.toString();
  if (offset !== fp.offset)
    return `the first record from offset ${fp.offset} is at ${offset} (compacted away)`;
  if (found.timestamp !== fp.timestamp)
    return `the record at offset ${fp.offset} has timestamp ${found.timestamp}, not ${fp.timestamp}`;
  if (recordHash(found.key, found.value) !== fp.hash)
    return `the record at offset ${fp.offset} has another key or value`;
  return undefined;
}

function record(
  value: unknown,
  field: string,
  keyOk: (key: string) => boolean,
  valueOk: (value: string) => boolean,
): Record<string, string> {
  if (!isObject(value)) throw new CheckpointMetaError(`${field} must be an object`);
  const entries: Array<[string, string]> = [];
  for (const [k, v] of Object.entries(value)) {
    if (!keyOk(k)) throw new CheckpointMetaError(`${field} has an invalid key ${JSON.stringify(k)}`);
    if (typeof v !== 'string' || !valueOk(v)) {
      throw new CheckpointMetaError(`${field}[${JSON.stringify(k)}] is invalid: ${JSON.stringify(v)}`);
    }
    entries.push([k, v]);
  }
  // fromEntries defines own properties, so a key such as "__proto__" cannot reach the prototype.
  return Object.fromEntries(entries);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isStoreKey(key: string): boolean {
  return key.length > 0 && key !== '__proto__';
}

function isOffset(value: string): boolean {
  return OFFSET.test(value) && BigInt(value) <= MAX_OFFSET;
}
