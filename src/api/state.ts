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
export interface MapStateDescriptor<K, V> {
  readonly kind: 'map';
  readonly serde: Serde<Array<[K, V]>>;
  readonly __type?: [K, V];
}
export interface ListStateDescriptor<T> {
  readonly kind: 'list';
  readonly serde: Serde<T[]>;
  readonly __type?: T;
}

/** One value per key. @example state: { last: valueState<number>() } */
export function valueState<T>(serde: Serde<T> = json<T>()): ValueStateDescriptor<T> {
  return { kind: 'value', serde };
}
/** A map per key. @example state: { seen: mapState<string, number>() } */
export function mapState<K, V>(
  serde: Serde<Array<[K, V]>> = json<Array<[K, V]>>(),
): MapStateDescriptor<K, V> {
  return { kind: 'map', serde };
}
/** A list per key. @example state: { recent: listState<Reading>() } */
export function listState<T>(serde: Serde<T[]> = json<T[]>()): ListStateDescriptor<T> {
  return { kind: 'list', serde };
}

/** The current key's value. */
export interface ValueState<T> {
  get(): T | undefined;
  set(value: T): void;
  clear(): void;
}
/** The current key's map. Iteration order is insertion order. */
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
/** The current key's list. */
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

/**
 * The handles of a processor's state. When the state type could not be inferred (an explicit
 * output type, `process<Out>(...)`, stops TypeScript from inferring the rest), handles are `any`;
 * write `process<Out, typeof state>(...)` or leave the output type to inference to get them typed.
 */
export type StateHandles<S> = 0 extends 1 & S ? any : { readonly [N in keyof S]: StateHandle<S[N]> };
