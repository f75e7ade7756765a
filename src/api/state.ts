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
