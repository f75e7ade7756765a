import { prng } from '../../examples/load-generator.js';

/** A small seeded PRNG (mulberry32): the same seed gives the same fuzz inputs on every machine. */
export function rng(seed: number) {
  const next = prng(seed);
  const int = (n: number) => Math.floor(next() * n);
  return {
    next,
    int,
    pick: <T>(xs: readonly T[]): T => xs[int(xs.length)]!,
    bytes(n: number): Buffer {
      const b = Buffer.allocUnsafe(n);
      for (let i = 0; i < n; i++) b[i] = int(256);
      return b;
    },
  };
}
export type Rng = ReturnType<typeof rng>;

/** The seed of a fuzz run: FUZZ_SEED when set (to replay a failure), else a fixed one for CI. */
export function fuzzSeed(fallback: number): number {
  const s = Number(process.env.FUZZ_SEED);
  return Number.isInteger(s) ? s : fallback;
}

/** Bytes that are not valid UTF-8: a lone continuation byte, an overlong form, a surrogate, a cut sequence. */
export const INVALID_UTF8: readonly Buffer[] = [
  Buffer.from([0x80]),
  Buffer.from([0xc0, 0xaf]),
  Buffer.from([0xed, 0xa0, 0x80]),
  Buffer.from([0xe2, 0x82]),
  Buffer.from([0xff, 0xfe, 0xfd]),
  Buffer.from([0xf8, 0x88, 0x80, 0x80, 0x80]),
];

/** JSON documents of the wrong shape for a `{ k: string, seq: number }` record. */
export const WRONG_JSON_TYPES: readonly string[] = [
  'null',
  '42',
  '"text"',
  'true',
  '[]',
  '[1,2,3]',
  '{}',
  '{"seq":"7"}',
  '{"seq":null}',
  '{"seq":{"n":1}}',
  '{"seq":[1]}',
];
