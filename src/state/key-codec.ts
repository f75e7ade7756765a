/**
 * Order-preserving key encodings for RocksDB, which sorts keys by unsigned bytes.
 *
 * - Timestamps are 8 bytes, big-endian, with the sign bit flipped, so that byte order equals
 *   numeric order for every safe integer, negative ones included.
 * - Composite keys carry a 4-byte big-endian length before their first part, so that ("ab", "c")
 *   and ("a", "bc") differ and all suffixes of one prefix sit together in one contiguous range.
 *   (The groups themselves sort by prefix length first, then by prefix bytes.)
 *
 * Decoders return views (`subarray`) into their input, not copies.
 */

const TS_BYTES = 8;
const LEN_BYTES = 4;
const TWO_32 = 2 ** 32;
const SIGN = 0x80000000;
const EMPTY = Buffer.alloc(0);

function writeTs(buf: Buffer, ts: number, offset: number): void {
  if (!Number.isSafeInteger(ts)) throw new RangeError(`timestamp must be a safe integer, got ${ts}`);
  const hi = Math.floor(ts / TWO_32); // within ±2^21 for safe integers
  buf.writeUInt32BE((hi + SIGN) >>> 0, offset);
  buf.writeUInt32BE(ts - hi * TWO_32, offset + 4);
}

function readTs(buf: Buffer, offset: number): number {
  return (buf.readUInt32BE(offset) - SIGN) * TWO_32 + buf.readUInt32BE(offset + 4);
}

function tooShort(what: string, buf: Buffer): never {
  throw new RangeError(`${what}: ${buf.length} bytes is too short`);
}

/** 8 bytes that sort like `ts` (a safe integer, e.g. epoch milliseconds). */
export function encodeTimestamp(ts: number): Buffer {
  const buf = Buffer.allocUnsafe(TS_BYTES);
  writeTs(buf, ts, 0);
  return buf;
}

export function decodeTimestamp(buf: Buffer, offset = 0): number {
  if (buf.length < offset + TS_BYTES) tooShort('timestamp', buf);
  return readTs(buf, offset);
}

/**
 * A timer's key: the time first, so a scan of the timer store yields timers in firing order.
 *
 * @example
 * const k = encodeTimerKey(1_700_000_000_000, userKey);
 * store.iterate('timers', { lt: timerScanEnd(watermark) }); // every timer due at or before `watermark`
 */
export function encodeTimerKey(ts: number, key: Buffer): Buffer {
  const buf = Buffer.allocUnsafe(TS_BYTES + key.length);
  writeTs(buf, ts, 0);
  key.copy(buf, TS_BYTES);
  return buf;
}

export function decodeTimerKey(buf: Buffer): { ts: number; key: Buffer } {
  if (buf.length < TS_BYTES) tooShort('timer key', buf);
  return { ts: readTs(buf, 0), key: buf.subarray(TS_BYTES) };
}

/** Exclusive upper bound for a timer scan that includes every timer at or before `ts`. */
export function timerScanEnd(ts: number): Buffer {
  return encodeTimestamp(ts + 1);
}

/**
 * A composite key, `prefix` then `suffix`, with the prefix's length in front.
 *
 * @example
 * const k = concatKey(userKey, mapKey);                   // a map-state entry
 * store.scanSync('seen', prefixRange(concatPrefix(userKey))); // all entries of userKey
 */
export function concatKey(prefix: Buffer, suffix: Buffer): Buffer {
  const buf = Buffer.allocUnsafe(LEN_BYTES + prefix.length + suffix.length);
  buf.writeUInt32BE(prefix.length, 0);
  prefix.copy(buf, LEN_BYTES);
  suffix.copy(buf, LEN_BYTES + prefix.length);
  return buf;
}

/** The shared beginning of every {@link concatKey} with this prefix. */
export function concatPrefix(prefix: Buffer): Buffer {
  return concatKey(prefix, EMPTY);
}

export function decodeConcatKey(buf: Buffer): { prefix: Buffer; suffix: Buffer } {
  if (buf.length < LEN_BYTES) tooShort('composite key', buf);
  const end = LEN_BYTES + buf.readUInt32BE(0);
  if (buf.length < end) tooShort('composite key', buf);
  return { prefix: buf.subarray(LEN_BYTES, end), suffix: buf.subarray(end) };
}

/**
 * A window's key: the record key (length-prefixed), then the window start, then optionally the
 * window end (session windows). All windows of one key sit together, ordered by start, then end.
 */
export function encodeWindowKey(key: Buffer, windowStart: number, windowEnd?: number): Buffer {
  const base = LEN_BYTES + key.length;
  const buf = Buffer.allocUnsafe(base + TS_BYTES + (windowEnd === undefined ? 0 : TS_BYTES));
  buf.writeUInt32BE(key.length, 0);
  key.copy(buf, LEN_BYTES);
  writeTs(buf, windowStart, base);
  if (windowEnd !== undefined) writeTs(buf, windowEnd, base + TS_BYTES);
  return buf;
}

export function decodeWindowKey(buf: Buffer): { key: Buffer; windowStart: number; windowEnd?: number } {
  if (buf.length < LEN_BYTES) tooShort('window key', buf);
  const base = LEN_BYTES + buf.readUInt32BE(0);
  const rest = buf.length - base;
  if (rest !== TS_BYTES && rest !== 2 * TS_BYTES) {
    throw new RangeError(`window key: expected 8 or 16 bytes after the key, found ${rest}`);
  }
  const key = buf.subarray(LEN_BYTES, base);
  const windowStart = readTs(buf, base);
  return rest === TS_BYTES
    ? { key, windowStart }
    : { key, windowStart, windowEnd: readTs(buf, base + TS_BYTES) };
}

/**
 * The scan range of one key's windows whose start is in [`startFrom`, `startTo`) (each bound
 * optional), for keys made by {@link encodeWindowKey} with or without an end.
 */
export function windowRange(key: Buffer, startFrom?: number, startTo?: number): { gte: Buffer; lt?: Buffer } {
  const gte = startFrom === undefined ? concatPrefix(key) : encodeWindowKey(key, startFrom);
  const lt = startTo === undefined ? prefixUpperBound(concatPrefix(key)) : encodeWindowKey(key, startTo);
  return lt === undefined ? { gte } : { gte, lt };
}

/**
 * The smallest key greater than every key that starts with `prefix`, or `undefined` when there
 * is none (the prefix is all 0xff bytes).
 */
export function prefixUpperBound(prefix: Buffer): Buffer | undefined {
  let i = prefix.length - 1;
  while (i >= 0 && prefix[i] === 0xff) i--;
  if (i < 0) return undefined;
  const out = Buffer.allocUnsafe(i + 1);
  prefix.copy(out, 0, 0, i + 1);
  out[i]++;
  return out;
}

/** The scan range of every key that starts with `prefix`. */
export function prefixRange(prefix: Buffer): { gte: Buffer; lt?: Buffer } {
  const lt = prefixUpperBound(prefix);
  return lt === undefined ? { gte: prefix } : { gte: prefix, lt };
}
