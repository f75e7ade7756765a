import { SerdeError } from '../errors.js';

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
    serialize: (v) => (v === undefined || v === null ? null : Buffer.from(JSON.stringify(v), 'utf8')),
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
    serialize: (v) => (v === null || v === undefined ? null : Buffer.from(String(v), 'utf8')),
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
