/**
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of a Kafka record batch,
 * eight bytes per step (slicing-by-8, tables built here at load). kafkajs's
 * `crc32C` takes one table lookup per byte; the produce encoder checksums every byte it sends,
 * which was about 1.6 % of a worker's busy CPU in the keyed running sum (bench/cpu.ts); this one
 * takes under half its CPU per byte (1.1 against 2.4 ns on the shared machine, 200 kB buffers).
 * test/unit/kafka/crc32c.test.ts compares it with kafkajs's on buffers of every length mod 8.
 */
const POLY = 0x82f63b78;

/** Eight 256-entry tables, one after another: table k at k * 256 (one array is the faster read). */
const T: Int32Array = (() => {
  const t = new Int32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY : c >>> 1;
    t[n] = c;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n]!;
    for (let k = 1; k < 8; k++) {
      c = t[c & 0xff]! ^ (c >>> 8);
      t[k * 256 + n] = c;
    }
  }
  return t;
})();

/** The CRC-32C of `b`, as an unsigned 32-bit number. */
export function crc32c(b: Uint8Array): number {
  return (crc32cUpdate(-1, b, 0, b.length) ^ -1) >>> 0;
}

/**
 * Carries a running CRC-32C over `b[from, to)`: start from -1, and `(state ^ -1) >>> 0` at the end
 * is the CRC of everything fed in (the record batch builder feeds each record as it is written).
 */
export function crc32cUpdate(state: number, b: Uint8Array, from: number, to: number): number {
  const t = T;
  let crc = state;
  let i = from;
  const n = to;
  const end8 = n - ((n - i) & 7);
  while (i < end8) {
    const lo = crc ^ (b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24));
    crc =
      t[1792 + (lo & 0xff)]! ^
      t[1536 + ((lo >>> 8) & 0xff)]! ^
      t[1280 + ((lo >>> 16) & 0xff)]! ^
      t[1024 + (lo >>> 24)]! ^
      t[768 + b[i + 4]!]! ^
      t[512 + b[i + 5]!]! ^
      t[256 + b[i + 6]!]! ^
      t[b[i + 7]!]!;
    i += 8;
  }
  while (i < n) crc = t[(crc ^ b[i++]!) & 0xff]! ^ (crc >>> 8);
  return crc;
}

/** a(x) * b(x) modulo the polynomial, in the reflected bit order of the CRC (x^0 is bit 31). */
function multModP(a: number, b: number): number {
  let m = 0x80000000;
  let p = 0;
  for (;;) {
    if ((a & m) !== 0) {
      p ^= b;
      if ((a & (m - 1)) === 0) break;
    }
    m >>>= 1;
    b = b & 1 ? (b >>> 1) ^ POLY : b >>> 1;
  }
  return p;
}

/** x^(2^k) modulo the polynomial, for k = 0..31 (x^1 is bit 30). */
const X2N: Int32Array = (() => {
  const t = new Int32Array(32);
  let p = 0x40000000;
  t[0] = p;
  for (let k = 1; k < 32; k++) t[k] = p = multModP(p, p);
  return t;
})();

/**
 * The CRC-32C of `A ++ B` from the CRC of A, the CRC of B and B's length (zlib's
 * `crc32_combine`, with this polynomial): O(log len) instead of reading A again. The record batch
 * builder checksums its records as they are written; a checkpoint then only checksums the batch's
 * 40 header bytes and combines the two.
 */
export function crc32cCombine(crcA: number, crcB: number, lengthB: number): number {
  // x^(8 * lengthB): multiply by x^(2^k) for every bit k of 8 * lengthB.
  let p = 0x80000000;
  let n = lengthB;
  let k = 3;
  while (n > 0) {
    if (n & 1) p = multModP(X2N[k & 31]!, p);
    n = Math.floor(n / 2);
    k++;
  }
  return ((multModP(p, crcA | 0) ^ crcB) >>> 0) as number;
}
