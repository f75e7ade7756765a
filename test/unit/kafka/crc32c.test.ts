import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { crc32c, crc32cCombine, crc32cUpdate } from '../../../src/kafka/crc32c.js';

const require = createRequire(import.meta.url);
const kafkajsCrc32C = require('kafkajs/src/protocol/recordBatch/crc32C/index.js') as (b: Buffer) => number;

test('crc32c gives kafkajs’s checksum for every length mod 8 and any bytes', () => {
  assert.equal(crc32c(Buffer.from('123456789')), 0xe3069283, 'the CRC-32C check value');
  let seed = 1;
  const rnd = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed & 0xff;
  };
  for (let len = 0; len < 300; len++) {
    const b = Buffer.alloc(len);
    for (let i = 0; i < len; i++) b[i] = len % 5 === 0 ? 0xff : rnd();
    assert.equal(crc32c(b), kafkajsCrc32C(b), `length ${len}`);
    // A view into a larger buffer at an odd start, as the encoder passes.
    const big = Buffer.concat([Buffer.from([1, 2, 3]), b]);
    assert.equal(crc32c(big.subarray(3)), kafkajsCrc32C(b));
  }
});

test('a running CRC over ranges at any start, and two CRCs combined, give the CRC of the whole', () => {
  let seed = 7;
  const rnd = (n: number) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  for (let round = 0; round < 400; round++) {
    const b = Buffer.alloc(1 + rnd(600));
    for (let i = 0; i < b.length; i++) b[i] = rnd(256);
    const cut = rnd(b.length + 1);
    const from = rnd(cut + 1);
    // Fed in two ranges, the first not starting at 0 (a record in the middle of a builder's buffer).
    const state = crc32cUpdate(crc32cUpdate(-1, b, from, cut), b, cut, b.length);
    assert.equal((state ^ -1) >>> 0, kafkajsCrc32C(b.subarray(from)), `round ${round}: running`);
    const a = b.subarray(0, cut);
    const c = b.subarray(cut);
    assert.equal(crc32cCombine(crc32c(a), crc32c(c), c.length), kafkajsCrc32C(b), `round ${round}: combined`);
  }
});
