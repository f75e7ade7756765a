import { SerdeError, safeString } from '../errors.js';

/** Turns values into bytes and back. `null` bytes are Kafka's null (a tombstone for values). */
export interface Serde<T> {
  readonly name: string;
  serialize(value: T): Buffer | null;
  deserialize(bytes: Buffer | null): T;
}

/** UTF-8 text. Invalid UTF-8 is an error (the record goes to the dead-letter topic). */
export function string(): Serde<string> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  return {
    name: 'string',
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

/**
 * JSON. @example app.stream('clicks', { value: json<Click>() })
 */
export function json<T = unknown>(): Serde<T> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  return {
    name: 'json',
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
}

/** Raw bytes, untouched. */
export function bytes(): Serde<Buffer> {
  return { name: 'bytes', serialize: (v) => v, deserialize: (b) => b as Buffer };
}

/** A number as its decimal text (readable by any consumer). */
export function number(): Serde<number> {
  const s = string();
  return {
    name: 'number',
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
