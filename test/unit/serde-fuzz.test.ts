import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bytes, json, number, type Serde, string } from '../../src/api/serdes.js';
import { SerdeError, SluiceError } from '../../src/errors.js';
import { DLQ_HEADERS, deadLetterRecord } from '../../src/runtime/dead-letter.js';
import { fuzzSeed, INVALID_UTF8, rng, WRONG_JSON_TYPES } from '../helpers/fuzz.js';

/*
 * Seeded fuzzing of the built-in serdes and of the dead-letter record: whatever the bytes or
 * values, a serde returns or throws a SerdeError (code SLUICE_SERDE), never anything else. Replay a
 * failure with FUZZ_SEED=<seed printed in the diagnostic>.
 */
const SEED = fuzzSeed(0x5eed_0008);
const ROUNDS = 3000;
const serdes: Array<[string, Serde<any>]> = [
  ['string', string()],
  ['json', json()],
  ['number', number()],
  ['bytes', bytes()],
];

/** Runs `fn`; it must return, or throw a SerdeError. Returns the error, if any. */
function clean(what: string, fn: () => unknown): SerdeError | undefined {
  try {
    fn();
    return undefined;
  } catch (e) {
    assert.ok(
      e instanceof SerdeError && e instanceof SluiceError && e.code === 'SLUICE_SERDE',
      `${what} threw ${(e as Error)?.constructor?.name}: ${(e as Error)?.message} (seed ${SEED})`,
    );
    assert.equal(typeof e.message, 'string');
    return e;
  }
}

function randomInput(r: ReturnType<typeof rng>): Buffer {
  switch (r.int(7)) {
    case 0:
      return r.bytes(r.int(64));
    case 1:
      return Buffer.concat([Buffer.from('{"seq":'), r.pick(INVALID_UTF8), Buffer.from('}')]);
    case 2:
      return Buffer.from(r.pick(WRONG_JSON_TYPES));
    case 3: {
      // Valid JSON cut at a random point.
      const s = JSON.stringify({ k: 'x'.repeat(r.int(20)), seq: r.int(1e6), n: [1, { a: null }] });
      return Buffer.from(s.slice(0, r.int(s.length)));
    }
    case 4:
      return Buffer.from(String(r.next() * 10 ** r.int(30) * (r.next() < 0.5 ? -1 : 1)));
    case 5:
      return Buffer.alloc(0);
    default:
      return Buffer.from([0xef, 0xbb, 0xbf, ...Buffer.from(r.pick(WRONG_JSON_TYPES))]);
  }
}

test('serdes should turn random, truncated, invalid-UTF-8 and wrong-type input into SerdeError or a value', (t) => {
  t.diagnostic(`seed ${SEED}`);
  const r = rng(SEED);
  const failures = new Map<string, number>();
  for (let i = 0; i < ROUNDS; i++) {
    const input = randomInput(r);
    for (const [name, s] of serdes) {
      const e = clean(`${name}.deserialize(${input.toString('hex').slice(0, 80)})`, () =>
        s.deserialize(input),
      );
      if (e) failures.set(name, (failures.get(name) ?? 0) + 1);
    }
  }
  // The fuzz must exercise the error paths, not only the happy ones.
  assert.ok((failures.get('json') ?? 0) > ROUNDS / 4, `json failures: ${failures.get('json')}`);
  assert.ok((failures.get('string') ?? 0) > 0 && (failures.get('number') ?? 0) > ROUNDS / 4);
  assert.equal(failures.get('bytes') ?? 0, 0, 'bytes accepts anything');
  for (const b of INVALID_UTF8) {
    assert.ok(
      clean('string', () => string().deserialize(b)),
      `invalid UTF-8 ${b.toString('hex')} accepted`,
    );
    assert.ok(clean('json', () => json().deserialize(b)));
  }
});

test('serdes should handle huge and deeply nested records without crashing', () => {
  const big = Buffer.alloc(16 * 1024 * 1024, 0x61);
  assert.equal(string().deserialize(big).length, big.length);
  assert.ok(clean('json huge', () => json().deserialize(big)));
  const bigJson = Buffer.from(JSON.stringify({ blob: 'x'.repeat(8 * 1024 * 1024) }));
  assert.equal((json().deserialize(bigJson) as { blob: string }).blob.length, 8 * 1024 * 1024);
  const deep = Buffer.from(`${'['.repeat(200_000)}${']'.repeat(200_000)}`);
  clean('json deep', () => json().deserialize(deep));
  const deepCut = Buffer.from('['.repeat(200_000));
  assert.ok(clean('json deep cut', () => json().deserialize(deepCut)));
});

test('serdes should refuse to write what they could not read back, with SerdeError', (t) => {
  t.diagnostic(`seed ${SEED}`);
  const cyclic: any = { a: 1 };
  cyclic.self = cyclic;
  const unwritable: Array<[Serde<any>, unknown]> = [
    [json(), 10n],
    [json(), cyclic],
    [json(), () => 1],
    [json(), Symbol('s')],
    [
      json(),
      {
        toJSON: () => {
          throw new Error('nope');
        },
      },
    ],
    [number(), Number.NaN],
    [number(), '12px'],
    [number(), { n: 1 }],
    [number(), Object.create(null)],
  ];
  for (const [s, v] of unwritable)
    assert.ok(
      clean(`${s.name}.serialize`, () => s.serialize(v)),
      `${s.name} wrote ${String(typeof v)}`,
    );

  // Round trips of random values.
  const r = rng(SEED + 1);
  const value = (depth: number): unknown => {
    switch (r.int(depth > 3 ? 4 : 6)) {
      case 0:
        return r.int(1e9) - 5e8;
      case 1:
        return r.next() < 0.5;
      case 2:
        return null;
      case 3:
        return String.fromCharCode(...Array.from({ length: r.int(12) }, () => r.int(0xd7ff)));
      case 4:
        return Array.from({ length: r.int(4) }, () => value(depth + 1));
      default:
        return Object.fromEntries(Array.from({ length: r.int(4) }, (_, i) => [`k${i}`, value(depth + 1)]));
    }
  };
  for (let i = 0; i < ROUNDS; i++) {
    const v = value(0);
    const back = json().deserialize(json().serialize(v));
    assert.deepEqual(back, v);
    const n = (r.next() - 0.5) * 10 ** r.int(300);
    assert.equal(number().deserialize(number().serialize(n)), n);
    const s = r.bytes(r.int(32)).toString('utf8');
    assert.equal(string().deserialize(string().serialize(s)), s);
  }
});

test('a dead-letter record should carry the original bytes and every header, whatever was thrown', (t) => {
  t.diagnostic(`seed ${SEED}`);
  const r = rng(SEED + 2);
  const thrown: unknown[] = [
    new TypeError('x is undefined'),
    new SerdeError('invalid JSON'),
    'a string',
    42,
    null,
    undefined,
    Object.create(null),
    { message: 'not an Error' },
    new Error('m'.repeat(100_000)),
    new Error('\u0000\ud800 bad text'),
  ];
  for (let i = 0; i < 500; i++) {
    const value = r.next() < 0.1 ? null : r.bytes(r.int(2048));
    const key = r.next() < 0.3 ? null : r.bytes(r.int(16));
    const rec = {
      key,
      value,
      offset: String(r.int(1e12)),
      timestamp: String(Date.now() - r.int(1e9)),
      headers: r.next() < 0.5 ? { [DLQ_HEADERS.errorClass]: 'forged', other: r.bytes(4) } : undefined,
    };
    const cause = r.pick(thrown);
    const e =
      cause instanceof Error
        ? cause
        : new Error(String(typeof cause === 'object' && cause !== null ? 'object' : cause));
    const d = deadLetterRecord(rec, e, { topic: 'in', partition: 3, kind: 'operator', operator: 'map-1' });
    assert.equal(d.key, key);
    assert.equal(d.value, value);
    assert.equal(d.headers[DLQ_HEADERS.errorClass], e.name);
    assert.ok(String(d.headers[DLQ_HEADERS.errorMessage]).length <= 1000);
    assert.equal(d.headers[DLQ_HEADERS.topic], 'in');
    assert.equal(d.headers[DLQ_HEADERS.partition], '3');
    assert.equal(d.headers[DLQ_HEADERS.offset], rec.offset);
    assert.equal(d.headers[DLQ_HEADERS.timestamp], rec.timestamp);
    assert.equal(d.headers[DLQ_HEADERS.operator], 'map-1');
    if (rec.headers) assert.ok(Buffer.isBuffer(d.headers.other), "the record's own headers are kept");
  }
});
