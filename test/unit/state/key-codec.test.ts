import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  concatKey,
  concatPrefix,
  decodeConcatKey,
  decodeTimerKey,
  decodeTimestamp,
  decodeWindowKey,
  encodeTimerKey,
  encodeTimestamp,
  encodeWindowKey,
  prefixRange,
  prefixUpperBound,
  timerScanEnd,
  windowRange,
} from '../../../src/state/key-codec.js';
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
  for (const v of values) assert.equal(decodeTimestamp(encodeTimestamp(v)), v);
  for (let i = 0; i < 20000; i++) {
    const a = values[Math.floor(r() * values.length)];
    const b = values[Math.floor(r() * values.length)];
    assert.equal(Buffer.compare(encodeTimestamp(a), encodeTimestamp(b)), sign(a - b), `${a} vs ${b}`);
  }
  assert.throws(() => encodeTimestamp(1.5), RangeError);
  assert.throws(() => encodeTimestamp(2 ** 53), RangeError);
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
  const due = encodeTimerKey(100, Buffer.from([0xff, 0xff]));
  assert.ok(Buffer.compare(due, timerScanEnd(100)) < 0, 'a timer at t is before timerScanEnd(t)');
  assert.ok(Buffer.compare(encodeTimerKey(101, Buffer.alloc(0)), timerScanEnd(100)) >= 0);
});

test('key codec should keep composite keys apart and their suffixes in one range', () => {
  assert.notDeepEqual(
    concatKey(Buffer.from('ab'), Buffer.from('c')),
    concatKey(Buffer.from('a'), Buffer.from('bc')),
  );
  const r = rng(3);
  for (let i = 0; i < 3000; i++) {
    const p = randomBytes(r, 5);
    const s = randomBytes(r, 5);
    const k = concatKey(p, s);
    const d = decodeConcatKey(k);
    assert.deepEqual(d.prefix, p);
    assert.deepEqual(d.suffix, s);
    const other = randomBytes(r, 5);
    const { gte, lt } = prefixRange(concatPrefix(p));
    const inRange = (x: Buffer) =>
      Buffer.compare(x, gte) >= 0 && (lt === undefined || Buffer.compare(x, lt) < 0);
    assert.ok(inRange(k));
    assert.equal(inRange(concatKey(other, s)), other.equals(p));
    // Within one prefix, composite keys sort like their suffixes.
    const s2 = randomBytes(r, 5);
    assert.equal(sign(Buffer.compare(k, concatKey(p, s2))), sign(Buffer.compare(s, s2)));
  }
  assert.throws(() => decodeConcatKey(Buffer.from([0, 0, 0, 9, 1])), RangeError);
});

test('key codec should round-trip window keys and sort one key by start, then end', () => {
  const key = Buffer.from('sensor-1');
  const a = encodeWindowKey(key, 60_000);
  assert.deepEqual(decodeWindowKey(a), { key, windowStart: 60_000 });
  const s = encodeWindowKey(key, -5, 1_000);
  assert.deepEqual(decodeWindowKey(s), { key, windowStart: -5, windowEnd: 1_000 });
  const r = rng(4);
  for (let i = 0; i < 5000; i++) {
    const s1 = randomTs(r);
    const s2 = r() < 0.3 ? s1 : randomTs(r);
    const e1 = randomTs(r);
    const e2 = randomTs(r);
    const expected = s1 === s2 ? sign(e1 - e2) : sign(s1 - s2);
    assert.equal(Buffer.compare(encodeWindowKey(key, s1, e1), encodeWindowKey(key, s2, e2)), expected);
  }
  assert.throws(() => decodeWindowKey(Buffer.concat([a, Buffer.from([1])])), RangeError);
});

test("key codec should bound a scan of one key's windows by start", () => {
  const key = Buffer.from('k');
  const other = Buffer.from('k2');
  const keys = [
    encodeWindowKey(key, 0),
    encodeWindowKey(key, 10, 20),
    encodeWindowKey(key, 20),
    encodeWindowKey(key, 30, 31),
    encodeWindowKey(other, 10),
  ];
  const within = (range: { gte: Buffer; lt?: Buffer }) =>
    keys
      .filter(
        (k) =>
          Buffer.compare(k, range.gte) >= 0 && (range.lt === undefined || Buffer.compare(k, range.lt) < 0),
      )
      .map((k) => decodeWindowKey(k).windowStart);
  assert.deepEqual(within(windowRange(key)), [0, 10, 20, 30]);
  assert.deepEqual(within(windowRange(key, 10, 30)), [10, 20]);
  assert.deepEqual(within(windowRange(key, 11)), [20, 30]);
});

test('key codec should compute prefix upper bounds with carry', () => {
  assert.deepEqual(prefixUpperBound(Buffer.from([1, 2, 3])), Buffer.from([1, 2, 4]));
  assert.deepEqual(prefixUpperBound(Buffer.from([1, 0xff, 0xff])), Buffer.from([2]));
  assert.equal(prefixUpperBound(Buffer.from([0xff, 0xff])), undefined);
  assert.equal(prefixUpperBound(Buffer.alloc(0)), undefined);
  assert.deepEqual(prefixRange(Buffer.from([0xff])), { gte: Buffer.from([0xff]) });
});
