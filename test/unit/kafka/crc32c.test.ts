import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { crc32c } from '../../../src/kafka/crc32c.js';

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
