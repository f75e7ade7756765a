import { CheckpointMetaError } from './errors.js';

/**
 * What a task's local state reflects, stored in the same RocksDB batch as the state itself
 * (column family `__meta`, key `checkpoint`). Recovery replays each changelog from
 * `changelogOffsets[store]`; a stored offset past the changelog's end, or a changed topic id,
 * means the changelog was recreated: wipe and rebuild.
 *
 * Offsets are decimal strings (Kafka offsets are int64; kafkajs hands them over as strings).
 */
export interface CheckpointMeta {
  version: 1;
  /** Store name → next changelog offset to replay from (last offset written + 1). */
  changelogOffsets: Record<string, string>;
  /** `topic:partition` → next input offset, as committed in the same transaction. */
  inputOffsets: Record<string, string>;
  /** Store name → changelog topic id (detects a topic deleted and recreated under its name). */
  changelogTopicIds?: Record<string, string>;
  /** Epoch milliseconds when the checkpoint was written. */
  writtenAt: number;
}

const OFFSET = /^(0|[1-9][0-9]{0,18})$/;
const MAX_OFFSET = 9223372036854775807n;
const INPUT_KEY = /^.+:(0|[1-9][0-9]*)$/;

/**
 * Encodes the meta entry as JSON bytes, validating it first.
 *
 * @example
 * const meta = encodeCheckpointMeta({
 *   version: 1,
 *   changelogOffsets: { counts: '1042' },
 *   inputOffsets: { 'clicks:3': '98213' },
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
    inputOffsets: record(input.inputOffsets, 'inputOffsets', (k) => INPUT_KEY.test(k), isOffset),
    writtenAt,
  };
  if (input.changelogTopicIds !== undefined) {
    meta.changelogTopicIds = record(
      input.changelogTopicIds,
      'changelogTopicIds',
      isStoreKey,
      (v) => v.length > 0,
    );
  }
  return meta;
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
