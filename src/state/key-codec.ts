/**
 * The order-preserving key encoding of timers for RocksDB, which sorts keys by unsigned bytes:
 * the timestamp as 8 bytes, big-endian, with the sign bit flipped, so that byte order equals
 * numeric order for every safe integer, negative ones included; then the record key.
 *
 * Decoders return views (`subarray`) into their input, not copies.
 */

const TS_BYTES = 8;
const TWO_32 = 2 ** 32;
const SIGN = 0x80000000;

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

/**
 * A timer's key: the time first, so a scan of the timer store yields timers in firing order.
 *
 * @example
 * const k = encodeTimerKey(1_700_000_000_000, userKey);
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

/**
 * The prefix of every entry of one record key's map or list state: the key's length as 4 bytes
 * big-endian, then the key. The length makes prefixes of different keys disjoint (no key's
 * prefix starts another's), so the entries of one key are exactly the RocksDB range
 * `[prefix, prefixEnd(prefix))`.
 *
 * @example
 * const p = collectionPrefix(Buffer.from('user-1')); // 00 00 00 06 75 73 65 72 2d 31
 */
export function collectionPrefix(key: Buffer): Buffer {
  const buf = Buffer.allocUnsafe(4 + key.length);
  buf.writeUInt32BE(key.length, 0);
  key.copy(buf, 4);
  return buf;
}

/** The record key of a collection entry's store key, and the entry's own part after it (views). */
export function decodeCollectionKey(buf: Buffer): { key: Buffer; entry: Buffer } {
  if (buf.length < 4) tooShort('collection key', buf);
  const n = buf.readUInt32BE(0);
  if (buf.length < 4 + n) tooShort('collection key', buf);
  return { key: buf.subarray(4, 4 + n), entry: buf.subarray(4 + n) };
}

/**
 * The smallest key after every key that starts with `prefix` (an exclusive upper bound of the
 * prefix's range), or `undefined` when there is none (the prefix is all 0xff bytes).
 */
export function prefixEnd(prefix: Buffer): Buffer | undefined {
  let i = prefix.length - 1;
  while (i >= 0 && prefix[i] === 0xff) i--;
  if (i < 0) return undefined;
  const end = Buffer.from(prefix.subarray(0, i + 1));
  end[i]! += 1;
  return end;
}

/** A list element's position as 8 bytes big-endian (a safe integer ≥ 0), so that byte order is list order. */
export function encodeListIndex(i: number): Buffer {
  if (!Number.isSafeInteger(i) || i < 0)
    throw new RangeError(`list index must be a safe integer ≥ 0, got ${i}`);
  const buf = Buffer.allocUnsafe(8);
  buf.writeUInt32BE(Math.floor(i / TWO_32), 0);
  buf.writeUInt32BE(i % TWO_32, 4);
  return buf;
}

export function decodeListIndex(buf: Buffer): number {
  if (buf.length !== 8) throw new RangeError(`list index: ${buf.length} bytes, want 8`);
  return buf.readUInt32BE(0) * TWO_32 + buf.readUInt32BE(4);
}
