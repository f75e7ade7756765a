import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeTimerKey, encodeTimerKey } from '../../../src/state/key-codec.js';
import { rng } from '../../helpers/running-sum.js';

function randomTs(r: () => number): number {
  switch (Math.floor(r() * 4)) {
    case 0:
      return Math.floor(r() * 2 ** 41); // epoch-millisecond-like
    case 1:
      return Math.floor((r() - 0.5) * 2 * Number.MAX_SAFE_INTEGER);
    case 2:
      return Math.floor((r() - 0.5) * 2 ** 33); // around the 32-bit boundary
    default:
      return Math.floor((r() - 0.5) * 10);
  }
}

function randomBytes(r: () => number, max: number): Buffer {
  const b = Buffer.alloc(Math.floor(r() * (max + 1)));
  for (let i = 0; i < b.length; i++) b[i] = r() < 0.2 ? (r() < 0.5 ? 0 : 255) : Math.floor(r() * 256);
  return b;
}

const sign = (n: number) => (n > 0 ? 1 : n < 0 ? -1 : 0);

test('key codec should order timestamps by numeric value, negatives and 2^53 included', () => {
  const r = rng(1);
  const edge = [Number.MIN_SAFE_INTEGER, -(2 ** 32), -1, 0, 1, 2 ** 32 - 1, 2 ** 32, Number.MAX_SAFE_INTEGER];
  const values = [...edge, ...Array.from({ length: 3000 }, () => randomTs(r))];
  const none = Buffer.alloc(0);
  for (const v of values) assert.equal(decodeTimerKey(encodeTimerKey(v, none)).ts, v);
  for (let i = 0; i < 20000; i++) {
    const a = values[Math.floor(r() * values.length)];
    const b = values[Math.floor(r() * values.length)];
    assert.equal(
      Buffer.compare(encodeTimerKey(a, none), encodeTimerKey(b, none)),
      sign(a - b),
      `${a} vs ${b}`,
    );
  }
  assert.throws(() => encodeTimerKey(1.5, none), RangeError);
  assert.throws(() => encodeTimerKey(2 ** 53, none), RangeError);
});

test('key codec should sort timer keys by time, then key, and round-trip them', () => {
  const r = rng(2);
  for (let i = 0; i < 5000; i++) {
    const ta = randomTs(r);
    const tb = r() < 0.3 ? ta : randomTs(r);
    const ka = randomBytes(r, 6);
    const kb = randomBytes(r, 6);
    const a = encodeTimerKey(ta, ka);
    const b = encodeTimerKey(tb, kb);
    const expected = ta === tb ? Buffer.compare(ka, kb) : sign(ta - tb);
    assert.equal(Buffer.compare(a, b), expected);
    const d = decodeTimerKey(a);
    assert.equal(d.ts, ta);
    assert.deepEqual(d.key, ka);
  }
  assert.throws(() => decodeTimerKey(Buffer.alloc(7)), RangeError);
});
