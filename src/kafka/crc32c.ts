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
  const t = T;
  let crc = -1;
  let i = 0;
  const n = b.length;
  const end8 = n - (n & 7);
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
  return (crc ^ -1) >>> 0;
}
