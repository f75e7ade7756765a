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
