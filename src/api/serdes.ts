import { SerdeError, safeString } from '../errors.js';

/** Turns values into bytes and back. `null` bytes are Kafka's null (a tombstone for values). */
export interface Serde<T> {
  readonly name: string;
  /**
   * A stable identity of the byte format, recorded with the topology so that `sluice plan` and a
   * starting worker see a store's serde change (see docs/OPERATIONS.md, "Changing a running job").
   * Built-in serdes have one (`string`, `json`, `bytes`, `number`); a serde without one is
   * fingerprinted from its name and code, which changes when the code does.
   */
  readonly fingerprint?: string;
  serialize(value: T): Buffer | null;
  deserialize(bytes: Buffer | null): T;
}

/** UTF-8 text. Invalid UTF-8 is an error (the record goes to the dead-letter topic). */
export function string(): Serde<string> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  return {
    name: 'string',
    fingerprint: 'string',
    serialize: (v) => (v === null || v === undefined ? null : Buffer.from(String(v), 'utf8')),
    deserialize: (b) => {
      if (b === null) return null as unknown as string;
      try {
        return decoder.decode(b);
      } catch (e) {
        throw new SerdeError('invalid UTF-8', e);
      }
    },
  };
}

/** Marks the serdes `json()` makes (not enumerable: a serde spread from one is not one). */
const BUILT_IN_JSON = Symbol('sluice.builtInJson');

/** A serde `json()` made: state values it holds must be what JSON.stringify writes. */
export const isBuiltInJson = (s: Serde<unknown>): boolean =>
  (s as { [BUILT_IN_JSON]?: boolean })[BUILT_IN_JSON] === true;

/**
 * JSON. @example app.stream('clicks', { value: json<Click>() })
 */
export function json<T = unknown>(): Serde<T> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const serde: Serde<T> = {
    name: 'json',
    fingerprint: 'json',
    serialize: (v) => {
      if (v === undefined || v === null) return null;
      let text: string | undefined;
      try {
        text = JSON.stringify(v);
      } catch (e) {
        // BigInt, a cycle, a toJSON that throws.
        throw new SerdeError(`cannot write JSON: ${(e as Error)?.message ?? String(e)}`, e);
      }
      // A function or a symbol has no JSON form.
      if (text === undefined) throw new SerdeError(`cannot write JSON: a ${typeof v} has no JSON form`);
      return Buffer.from(text, 'utf8');
    },
    deserialize: (b) => {
      if (b === null) return null as T;
      try {
        return JSON.parse(decoder.decode(b)) as T;
      } catch (e) {
        throw new SerdeError(`invalid JSON: ${(e as Error).message}`, e);
      }
    },
  };
  Object.defineProperty(serde, BUILT_IN_JSON, { value: true });
  return serde;
}

/** Raw bytes, untouched. */
export function bytes(): Serde<Buffer> {
  return { name: 'bytes', fingerprint: 'bytes', serialize: (v) => v, deserialize: (b) => b as Buffer };
}

/**
 * The key serde of a `keyBy` given none: UTF-8 text, and only text. A key function that returns
 * a number or an object must name its key serde (`{ key: number() }`, `{ key: json() }`), since
 * String(7) would come back as "7" after the repartition, not as the 7 the types promise.
 * @internal
 */
export function keyString(): Serde<string> {
  const s = string();
  return {
    name: 'string',
    // The bytes of string(): a keyBy that names { key: string() } later writes the same keys.
    fingerprint: 'string',
    serialize: (v) => {
      if (v !== null && v !== undefined && typeof v !== 'string')
        throw new SerdeError(
          `keyBy returned a ${typeof v} key (${safeString(v).slice(0, 40)}) but has no key serde: ` +
            'give one, e.g. keyBy(fn, { key: number() }) or { key: json() }',
        );
      return s.serialize(v);
    },
    deserialize: s.deserialize,
  };
}

/**
 * The value serde of a sink given none after an operator that made new values: JSON, except that
 * a Buffer is written as its bytes (not as JSON's `{"type":"Buffer","data":[…]}`).
 * @internal
 */
export function jsonOrBytes<T>(): Serde<T> {
  const j = json<T>();
  return {
    name: 'json',
    fingerprint: 'json-or-bytes',
    serialize: (v) => (Buffer.isBuffer(v) ? v : j.serialize(v)),
    deserialize: j.deserialize,
  };
}

/** A number as its decimal text (readable by any consumer). */
export function number(): Serde<number> {
  const s = string();
  return {
    name: 'number',
    fingerprint: 'number',
    serialize: (v) => {
      if (v === null || v === undefined) return null;
      // Anything else would write text that deserialize rejects (NaN, '12px', an object).
      if (typeof v !== 'number' || Number.isNaN(v))
        throw new SerdeError(`not a number: ${typeof v} ${safeString(v).slice(0, 40)}`);
      return Buffer.from(String(v), 'utf8');
    },
    deserialize: (b) => {
      if (b === null) return null as unknown as number;
      const text = s.deserialize(b);
      const n = Number(text);
      if (text.trim() === '' || Number.isNaN(n))
        throw new SerdeError(`not a number: ${JSON.stringify(text.slice(0, 40))}`);
      return n;
    },
  };
}

export interface Serdes<K, V> {
  key?: Serde<K>;
  value?: Serde<V>;
}
