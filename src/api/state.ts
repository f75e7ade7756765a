import { SerdeError } from '../errors.js';
import { json, type Serde } from './serdes.js';

/**
 * Keyed state descriptors for `process({ state: { ... } })`. Each becomes a store (a RocksDB
 * column family with a compacted changelog topic `<appId>-<store>-changelog`), and the handle the
 * operator sees is scoped to the key of the record being processed, as in Flink.
 */
export type StateDescriptor =
  | ValueStateDescriptor<any>
  | MapStateDescriptor<any, any>
  | ListStateDescriptor<any>;

export interface ValueStateDescriptor<T> {
  readonly kind: 'value';
  readonly serde: Serde<T>;
  readonly __type?: T;
}
/**
 * A map per record key, stored one entry per map key (see docs/ARCHITECTURE.md, "State layout"):
 * a `set` writes one RocksDB key and one changelog record, whatever the map's size.
 */
export interface MapStateDescriptor<K, V> {
  readonly kind: 'map';
  /** Serde of the map's keys. Their bytes order the map (`entries()` is in that order). */
  readonly keySerde: Serde<K>;
  /** Serde of the map's values. */
  readonly serde: Serde<V>;
  readonly __type?: [K, V];
}
/**
 * A list per record key, stored one entry per element: an `add` writes one RocksDB key and one
 * changelog record, whatever the list's length.
 */
export interface ListStateDescriptor<T> {
  readonly kind: 'list';
  /** Serde of one element. */
  readonly serde: Serde<T>;
  readonly __type?: T;
}

/** One value per key. @example state: { last: valueState<number>() } */
export function valueState<T>(serde: Serde<T> = json<T>()): ValueStateDescriptor<T> {
  return { kind: 'value', serde };
}
/**
 * A map per key, with a serde for its keys and one for its values (JSON by default).
 * @example state: { seen: mapState<string, number>({ key: string() }) }
 */
export function mapState<K, V>(serdes: { key?: Serde<K>; value?: Serde<V> } = {}): MapStateDescriptor<K, V> {
  return { kind: 'map', keySerde: serdes.key ?? json<K>(), serde: serdes.value ?? json<V>() };
}
/** A list per key; the serde is one element's (JSON by default). @example state: { recent: listState<Reading>() } */
export function listState<T>(serde: Serde<T> = json<T>()): ListStateDescriptor<T> {
  return { kind: 'list', serde };
}

/**
 * The current key's value. `get()` returns a copy of the stored value (as if deserialized, as in
 * Kafka Streams): changing it changes nothing until `set()`; `set()` stores a copy, so changing
 * the object afterwards does not change the state either. Numbers, strings, booleans and null are
 * not copied (nothing to copy).
 */
export interface ValueState<T> {
  get(): T | undefined;
  set(value: T): void;
  clear(): void;
}
/**
 * The current key's map. Iteration (`entries`, `keys`) is in the byte order of the serialized map
 * keys (RocksDB's order), not insertion order; `size` and iteration read the whole map. Values
 * are copied in and out, as in {@link ValueState}; `set(k, null)` is refused (use `delete`).
 */
export interface MapState<K, V> {
  get(key: K): V | undefined;
  set(key: K, value: V): void;
  has(key: K): boolean;
  delete(key: K): void;
  entries(): IterableIterator<[K, V]>;
  keys(): IterableIterator<K>;
  readonly size: number;
  clear(): void;
}
/**
 * The current key's list. `get()` returns a copy; `add` and `update` store copies (see
 * {@link ValueState}). `add` costs one entry; `get` reads the whole list; `update` rewrites every
 * element (and deletes those past the new end). Null elements are refused.
 */
export interface ListState<T> {
  get(): readonly T[];
  add(value: T): void;
  /** Replaces the whole list. */
  update(values: T[]): void;
  clear(): void;
}

export type StateHandle<D> =
  D extends ValueStateDescriptor<infer T>
    ? ValueState<T>
    : D extends MapStateDescriptor<infer K, infer V>
      ? MapState<K, V>
      : D extends ListStateDescriptor<infer T>
        ? ListState<T>
        : never;

declare const stateNotGiven: unique symbol;

/**
 * The state type parameter of `process<Out>(…)`: naming only the output type stops TypeScript
 * from inferring the state's type from `state: { … }` (type arguments are all given or all
 * inferred), so `ctx.state` has no handles to offer. Write `process<Out, typeof state>(…)` with
 * the descriptors in a `const state = { … }`, or leave `<Out>` out and let both be inferred.
 */
export type StateNotGiven = { readonly [stateNotGiven]?: true };

/**
 * What `ctx.state` is in `process<Out>({ state, … })`: nothing, so that a handle used there
 * (`ctx.state.last`) fails to compile instead of being `any`; see {@link StateNotGiven}.
 */
// biome-ignore lint/suspicious/noEmptyInterface: its name is the message tsc shows at ctx.state.x
export interface StateTypeNotGiven_WriteProcessOutTypeofState {}

/** The `state` a processor takes: its descriptors, or any when their type was not given. */
export type StateOption<S> = typeof stateNotGiven extends keyof S ? Record<string, StateDescriptor> : S;

/**
 * The handles of a processor's state, typed by its descriptors. `process<Out, any>(…)` makes
 * them `any`; `process<Out>(…)` gives none ({@link StateNotGiven}).
 */
export type StateHandles<S> = 0 extends 1 & S
  ? any
  : typeof stateNotGiven extends keyof S
    ? StateTypeNotGiven_WriteProcessOutTypeofState
    : { readonly [N in keyof S]: StateHandle<S[N]> };

/**
 * Internal (not exported by the package): marks a processor of Sluice's own (windows, joins) whose
 * state handles give the stored values themselves instead of copies. Their code never changes a
 * value without setting it again, and they read whole buffers per record, where a copy would
 * cost O(buffer) each time.
 */
export const LIVE_STATE: unique symbol = Symbol('sluice.liveState');

/** Marks `p` as one of Sluice's own processors (see {@link LIVE_STATE}). */
export function liveState<P extends object>(p: P): P {
  Object.defineProperty(p, LIVE_STATE, { value: true });
  return p;
}

/**
 * A deep copy of a state value, for the state handles (`get` returns one, `set` stores one), so
 * that the write-back cache's object is never shared with user code: a change made without
 * `set()` would change memory but not the changelog, and the state would differ after a restore.
 * Primitives are returned as they are; arrays, plain objects and Maps (map state's values) are
 * copied by hand, which is ~10x faster than `structuredClone` for JSON-shaped values; anything
 * else (Date, Buffer, class instances) through `structuredClone`.
 */
export function copyValue<T>(v: T): T {
  return copyDeep(v, false);
}

/**
 * {@link copyValue} for a state whose serde is the built-in `json()`: a BigInt anywhere in the
 * value throws a `SerdeError` where it is set, in the operator, so that its record is
 * dead-lettered; else the checkpoint's JSON.stringify would fail on it at every try.
 */
export function copyJsonValue<T>(v: T): T {
  return copyDeep(v, true);
}

function copyDeep<T>(v: T, json: boolean): T {
  if (typeof v !== 'object' || v === null) {
    if (json && typeof v === 'bigint')
      throw new SerdeError(
        `cannot write JSON: a bigint (${v}) has no JSON form; keep it as a string or a number, or give the state a serde that writes it`,
      );
    return v;
  }
  if (Array.isArray(v)) {
    const n = v.length;
    const out = new Array(n);
    for (let i = 0; i < n; i++) out[i] = copyDeep(v[i], json);
    return out as T;
  }
  const proto = Object.getPrototypeOf(v);
  if (proto === Object.prototype || proto === null) {
    const out: Record<string, unknown> = proto === null ? Object.create(null) : {};
    for (const k in v) out[k] = copyDeep((v as Record<string, unknown>)[k], json);
    return out as T;
  }
  if (v instanceof Map) {
    const out = new Map();
    for (const [k, x] of v) out.set(k, copyDeep(x, json));
    return out as T;
  }
  return structuredClone(v);
}
