import { TopologyError } from '../errors.js';
import { repartitionTopic } from '../topology/build.js';
import {
  type ErrorPolicy,
  type GraphBuilder,
  type GraphNode,
  INFLIGHT_STATE,
  type StoreSpec,
} from '../topology/nodes.js';
import { type AsyncContext, type AsyncOptions, asyncSettings, isAsyncFunction } from './async.js';
import type { ConnectProcessor, ProcessContext, Processor, RecordContext } from './context.js';
import { type JoinBufferKey, joinBufferKeySerde } from './join-buffer.js';
import { cached } from './record-cache-mode.js';
import { bytes, json, jsonOrBytes, keyString, type Serde, type Serdes } from './serdes.js';
import {
  copyValue,
  LIVE_STATE,
  liveState,
  mapState,
  type StateDescriptor,
  type StateNotGiven,
  valueState,
} from './state.js';
import {
  type WindowBounds,
  type Windowed,
  type WindowFold,
  type WindowOptions,
  type WindowSpec,
  windowProcessor,
} from './windows.js';

export interface AppInternals {
  readonly id: string;
  readonly graph: GraphBuilder;
}

export interface NamedOptions {
  /** A stable name (used for internal topics and stores; keep it when you change the job). */
  name?: string;
}

/** Options of an operator that runs user code. */
export interface OperatorOptions extends NamedOptions {
  /**
   * What to do with a record when this operator throws, overriding `processing.errorPolicy`:
   * `dlq` (to `<appId>-dlq`), `skip` (count and drop) or `fail` (stop the worker).
   * @example .map((v) => enrich(v), { onError: 'skip' })
   */
  onError?: ErrorPolicy;
}

/** Options of `mapAsync`, `filterAsync`, `flatMapAsync` and of a `process` with an async `onRecord`. */
export interface AsyncOperatorOptions extends OperatorOptions, AsyncOptions {}

/** Options of `count`, `reduce` and `aggregate`. */
export interface AggregateOptions extends OperatorOptions {
  /**
   * Through the record cache (default true; bounded by `state.recordCacheMaxBytes`): at most one
   * update per key per checkpoint goes downstream, the newest, as with Kafka Streams' record
   * cache. `false` emits every update.
   */
  cache?: boolean;
}

/**
 * A stream of records. Operators return new streams; nothing runs until the app is started.
 * @example app.stream('clicks', { value: json<Click>() }).filter((c) => !c.bot).to('human-clicks')
 */
export class Stream<K, V> {
  protected readonly app: AppInternals;
  /** @internal */
  readonly node: GraphNode;

  /** @internal */
  constructor(app: AppInternals, node: GraphNode) {
    this.app = app;
    this.node = node;
  }

  /** @internal */
  app_(): AppInternals {
    return this.app;
  }

  protected next<K2, V2>(
    spec: GraphNode['spec'],
    opts: {
      name?: string | undefined;
      keySerde?: Serde<any>;
      keyed?: boolean;
      onError?: ErrorPolicy | undefined;
      /** The values pass through unchanged (filter, peek, shed): they keep the stream's value serde. */
      sameValues?: boolean;
    } = {},
  ): Stream<K2, V2> {
    const node = this.app.graph.add(spec.kind, spec, [this.node], {
      name: opts.name,
      onError: opts.onError,
      keySerde: opts.keySerde ?? this.node.keySerde,
      keyed: opts.keyed ?? this.node.keyed,
      valueSerde: opts.sameValues ? this.node.valueSerde : undefined,
    });
    return this.node.keyed && (opts.keyed ?? true)
      ? new KeyedStream<K2, V2>(this.app, node)
      : new Stream<K2, V2>(this.app, node);
  }

  /** Transforms each value; the key stays. */
  map<R>(
    fn: (value: V, ctx: RecordContext<K>) => R,
    opts?: OperatorOptions,
  ): this extends KeyedStream<K, V> ? KeyedStream<K, R> : Stream<K, R> {
    return this.next({ kind: 'map', fn }, { name: opts?.name, onError: opts?.onError }) as any;
  }

  /** Keeps the records for which `fn` is true. */
  filter(fn: (value: V, ctx: RecordContext<K>) => boolean, opts?: OperatorOptions): this {
    return this.next(
      { kind: 'filter', fn },
      { name: opts?.name, onError: opts?.onError, sameValues: true },
    ) as any;
  }

  /** Zero, one or many values per record, each with the record's key. */
  flatMap<R>(
    fn: (value: V, ctx: RecordContext<K>) => Iterable<R>,
    opts?: OperatorOptions,
  ): this extends KeyedStream<K, V> ? KeyedStream<K, R> : Stream<K, R> {
    return this.next({ kind: 'flatMap', fn }, { name: opts?.name, onError: opts?.onError }) as any;
  }

  /**
   * Like `map`, with a function that returns a Promise (an HTTP call, a database lookup): up to
   * `concurrency` records of a task in it at once, in per-key order by default (`ordered`), each
   * attempt bounded by `timeoutMs` (its `ctx.signal` aborts then) and retried `retries` times with
   * backoff; a record that still fails goes through the error policy (`onError`), like a throwing
   * `map`. Under exactly-once each record's result is applied once: an input offset commits with
   * the outputs of every record before it, and the records still in the stage at a checkpoint are
   * stored with it and run again after a crash (so the function may be called more than once for
   * a record, its result is used once). See docs/ASYNC.md.
   * @example .mapAsync(async (order, ctx) => ({ ...order, customer: await lookup(order.customerId, ctx.signal) }), { concurrency: 32, timeoutMs: 2000, retries: 2 })
   */
  mapAsync<R>(
    fn: (value: V, ctx: AsyncContext<K>) => Promise<R>,
    opts?: AsyncOperatorOptions,
  ): this extends KeyedStream<K, V> ? KeyedStream<K, R> : Stream<K, R> {
    return this.#async('map', fn, opts, false) as any;
  }

  /** Like `filter`, with a predicate that returns a Promise; options as for {@link mapAsync}. */
  filterAsync(fn: (value: V, ctx: AsyncContext<K>) => Promise<boolean>, opts?: AsyncOperatorOptions): this {
    return this.#async('filter', fn, opts, true) as any;
  }

  /** Like `flatMap`, with a function whose Promise gives the values; options as for {@link mapAsync}. */
  flatMapAsync<R>(
    fn: (value: V, ctx: AsyncContext<K>) => Promise<Iterable<R>>,
    opts?: AsyncOperatorOptions,
  ): this extends KeyedStream<K, V> ? KeyedStream<K, R> : Stream<K, R> {
    return this.#async('flatMap', fn, opts, false) as any;
  }

  #async(
    op: 'map' | 'filter' | 'flatMap',
    fn: (value: any, ctx: AsyncContext<any>) => unknown,
    opts: AsyncOperatorOptions | undefined,
    sameValues: boolean,
  ): Stream<any, any> {
    if (typeof fn !== 'function') throw new TopologyError(`${op}Async needs a function`);
    const name = opts?.name ?? this.app.graph.autoName(`${op}Async`);
    const settings = asyncSettings(name, opts);
    return this.next(
      { kind: 'async', op, fn, settings, stores: [inflightStore(name)] },
      { name, onError: opts?.onError, sameValues },
    );
  }

  /** Sees each record without changing it (metrics, debugging). */
  peek(fn: (value: V, ctx: RecordContext<K>) => void, opts?: OperatorOptions): this {
    return this.next(
      { kind: 'peek', fn },
      { name: opts?.name, onError: opts?.onError, sameValues: true },
    ) as any;
  }

  /** One stream of the records of this stream and the others (same sub-topology, same task). */
  merge(...others: Stream<K, V>[]): Stream<K, V> {
    const parents = [this.node, ...others.map((o) => o.node)];
    const keyed = parents.every((p) => p.keyed);
    // One value serde for all (the same one, or built-ins of one name), or none: JSON downstream.
    const vs = this.node.valueSerde;
    const sameValues = vs !== undefined && parents.every((p) => p.valueSerde?.name === vs.name);
    const node = this.app.graph.add('merge', { kind: 'merge' }, parents, {
      keySerde: this.node.keySerde,
      keyed,
      valueSerde: sameValues ? vs : undefined,
    });
    return keyed ? new KeyedStream<K, V>(this.app, node) : new Stream<K, V>(this.app, node);
  }

  /** Splits the stream: each record goes to the first branch whose predicate holds (others: dropped). */
  branch(...predicates: Array<(value: V, ctx: RecordContext<K>) => boolean>): Stream<K, V>[] {
    return predicates.map((p, i) =>
      this.filter((v, ctx) => {
        for (let j = 0; j < i; j++) if (predicates[j]!(v, ctx)) return false;
        return p(v, ctx);
      }),
    );
  }

  /**
   * Gives each record a new key. Records are written to the repartition topic
   * `<appId>-<name>-repartition` (created with the source's partition count) and read back
   * partitioned by the new key, so that keyed state sees every record of a key in one task.
   * Keys are UTF-8 text unless `key` gives their serde: a key function that returns anything but
   * a string needs one, so the key downstream has the type it was given.
   * @example .keyBy((c) => c.page)
   * @example .keyBy((r) => r.bucket, { key: number() })
   */
  keyBy<K2 extends string | null | undefined>(
    fn: (value: V, ctx: RecordContext<K>) => K2,
    opts?: OperatorOptions & { key?: Serde<K2>; value?: Serde<V> },
  ): KeyedStream<K2, V>;
  keyBy<K2>(
    fn: (value: V, ctx: RecordContext<K>) => K2,
    opts: OperatorOptions & { key: Serde<K2>; value?: Serde<V> },
  ): KeyedStream<K2, V>;
  keyBy<K2>(
    fn: (value: V, ctx: RecordContext<K>) => K2,
    opts: OperatorOptions & { key?: Serde<K2>; value?: Serde<V> } = {},
  ): KeyedStream<K2, V> {
    const keySerde = opts.key ?? (keyString() as unknown as Serde<K2>);
    const valueSerde = opts.value ?? this.node.valueSerde ?? json<V>();
    const base = opts.name ?? this.app.graph.autoName('keyby');
    const topic = repartitionTopic(this.app.id, base);
    const select = this.app.graph.add('selectKey', { kind: 'selectKey', fn }, [this.node], {
      name: `${base}-select`,
      keySerde,
      keyed: false,
      onError: opts.onError,
    });
    this.app.graph.add(
      'sink',
      { kind: 'sink', topic, key: keySerde, value: valueSerde, internal: true },
      [select],
      {
        name: `${base}-sink`,
        keySerde,
        keyed: false,
      },
    );
    const source = this.app.graph.add(
      'source',
      { kind: 'source', topics: [topic], key: keySerde, value: valueSerde, internal: true },
      [],
      { name: `${base}-source`, keySerde, keyed: true, valueSerde },
    );
    return new KeyedStream<K2, V>(this.app, source);
  }

  /**
   * Declares that records are already partitioned by their Kafka key (e.g. the topic was written
   * keyed by a Java or kafkajs producer), so keyed state may be used without a repartition.
   */
  byKey(): KeyedStream<K, V> {
    const node = this.app.graph.add('merge', { kind: 'merge' }, [this.node], {
      keySerde: this.node.keySerde,
      keyed: true,
      valueSerde: this.node.valueSerde,
    });
    return new KeyedStream<K, V>(this.app, node);
  }

  /**
   * A load-shedding point. Under overload (`overload.mode: shed | divert` with
   * `overload.placement: operator`) the worker drops here the fraction of records that keeps it
   * within its headroom: at random, or (with `overload.drop: priority`) those of lowest
   * `priority(value)` first. In divert mode the dropped records go to `<appId>-overflow`, keyed
   * as here, the value serialized with `value` (by default the source's serde while the values are
   * still the source's, else JSON). Otherwise records pass through.
   * Place it before the expensive operators: shedding after them saves nothing.
   * @example stream.shed({ priority: (order) => order.amount }).map(enrich).to('enriched')
   */
  shed(
    opts: NamedOptions & { priority?: (value: V, ctx: RecordContext<K>) => number; value?: Serde<V> } = {},
  ): this {
    return this.next(
      { kind: 'shed', priority: opts.priority as any, value: opts.value ?? this.node.valueSerde },
      { name: opts.name, sameValues: true },
    ) as any;
  }

  /**
   * Writes the stream to a topic. The key serde defaults to the stream's; the value serde to the
   * source's while the values are still the source's (filter, peek, keyBy keep them: a stream
   * read without serdes is bytes in, bytes out), else to JSON (a Buffer value as its bytes).
   */
  to(topic: string, serdes: Serdes<K, V> = {}, opts?: NamedOptions): void {
    if (!topic || /\s/.test(topic)) throw new TopologyError(`invalid topic name ${JSON.stringify(topic)}`);
    this.app.graph.add(
      'sink',
      {
        kind: 'sink',
        topic,
        key: serdes.key ?? this.node.keySerde,
        value: serdes.value ?? this.node.valueSerde ?? jsonOrBytes<V>(),
        internal: false,
      },
      [this.node],
      { name: opts?.name, keySerde: this.node.keySerde, keyed: false },
    );
  }
}

/**
 * A stream partitioned by its key: keyed state, aggregations and timers are allowed.
 */
export class KeyedStream<K, V> extends Stream<K, V> {
  /**
   * Runs a processor with keyed state and timers. The state's type is inferred from `state` when
   * no type argument is written; with an explicit output type write both, `process<Out, typeof state>`
   * (`process<Out>` alone gives `ctx.state` no handles: see {@link StateNotGiven}).
   * @example
   * const state = { last: valueState<number>() };
   * .process<Alert, typeof state>({
   *   state,
   *   onRecord(r, ctx) { const prev = ctx.state.last.get(); ctx.state.last.set(r.temp); if (prev !== undefined) ctx.emit({ prev, now: r.temp }); },
   * })
   */
  process<R, S extends Record<string, StateDescriptor> = StateNotGiven>(
    processor: Processor<K, V, R, S>,
    opts?: OperatorOptions | (AsyncOperatorOptions & { async?: boolean }),
  ): KeyedStream<K, R> {
    const name = opts?.name ?? this.app.graph.autoName('process');
    // An `async onRecord` (or `{ async: true }` for one that returns a Promise without the
    // keyword) runs as an async stage: see mapAsync, and docs/ASYNC.md for what its state may do.
    const isAsync =
      isAsyncFunction(processor.onRecord) || (opts as { async?: boolean } | undefined)?.async === true;
    if (!isAsync) {
      const stores = storesOf(name, processor.state, !!processor.onTimer);
      return this.next(
        { kind: 'process', processor: processor as any, stores },
        { name, onError: opts?.onError },
      ) as KeyedStream<K, R>;
    }
    const settings = asyncSettings(name, opts as AsyncOptions);
    const problems: string[] = [];
    if (processor.onTimer)
      problems.push('an async onRecord cannot have timers (onTimer): put them in a process after it');
    for (const [stateName, d] of Object.entries(processor.state ?? {}) as [string, StateDescriptor][])
      if (d.kind !== 'value')
        problems.push(`state ${stateName} is a ${d.kind}State: an async onRecord may use valueState only`);
    if (problems.length > 0) throw new TopologyError(`operator ${name}: ${problems.join('; ')}`);
    const stores = [...storesOf(name, processor.state, false), inflightStore(name)];
    return this.next(
      { kind: 'process', processor: processor as any, stores, async: settings },
      { name, onError: opts?.onError },
    ) as KeyedStream<K, R>;
  }

  /**
   * Groups records into event-time windows per key; aggregate them with count, reduce, aggregate
   * or process. @example .window(tumbling(10_000), { grace: 2_000 }).count().to('counts')
   */
  window(spec: WindowSpec, opts: WindowOptions & NamedOptions = {}): WindowedStream<K, V> {
    return new WindowedStream<K, V>(this, spec, opts);
  }

  /**
   * Two keyed streams sharing one keyed state: `process({ onLeft, onRight })`. Both inputs must be
   * co-partitioned (same key, same partition count; `keyBy` makes them so).
   */
  connect<V2>(other: KeyedStream<K, V2>): ConnectedStreams<K, V, V2> {
    if (other.node === this.node) throw new TopologyError('cannot connect a stream to itself');
    return new ConnectedStreams<K, V, V2>(this.app, this, other);
  }

  /**
   * Joins with a table (the table's current value for the record's key) or with another stream
   * within a time window (every pair of records of a key at most `within` ms apart).
   * @example clicks.join(users, (click, user) => ({ ...click, country: user.country }))
   * @example orders.join(payments, { within: 60_000 }, (o, p) => ({ o, p }))
   */
  join<T, R>(
    table: Table<K, T>,
    joiner: (value: V, row: T, ctx: RecordContext<K>) => R,
    opts?: NamedOptions,
  ): KeyedStream<K, R>;
  join<V2, R>(
    other: KeyedStream<K, V2>,
    window: StreamJoinOptions,
    joiner: (left: V, right: V2, ctx: RecordContext<K>) => R,
  ): KeyedStream<K, R>;
  join(other: any, a: any, b?: any): KeyedStream<K, any> {
    if (other instanceof Table) return tableJoin(this, other, a, b, false);
    if (!(other instanceof KeyedStream))
      throw new TopologyError('join takes a table or a keyed stream (use keyBy or byKey first)');
    return streamJoin(this, other, a, b);
  }

  /** Like a table join, but records without a table row join with `undefined`. */
  leftJoin<T, R>(
    table: Table<K, T>,
    joiner: (value: V, row: T | undefined, ctx: RecordContext<K>) => R,
    opts?: NamedOptions,
  ): KeyedStream<K, R> {
    return tableJoin(this, table, joiner, opts, true);
  }

  /** A running reduction per key; emits the new value for every record. */
  reduce(
    fn: (acc: V, value: V, ctx: RecordContext<K>) => V,
    opts?: AggregateOptions & { serde?: Serde<V> },
  ): KeyedStream<K, V> {
    return this.aggregate<V>(
      () => undefined as unknown as V,
      (acc, v, ctx) => (acc === undefined ? v : fn(acc, v, ctx)),
      {
        name: opts?.name ?? this.app.graph.autoName('reduce'),
        serde: opts?.serde,
        onError: opts?.onError,
        cache: opts?.cache,
      },
    );
  }

  /**
   * A running aggregate per key, from `init()`; emits the new aggregate downstream, for every
   * record or (with the record cache, the default) the newest per key at each checkpoint.
   */
  aggregate<A>(
    init: () => A,
    fn: (acc: A, value: V, ctx: RecordContext<K>) => A,
    opts?: AggregateOptions & { serde?: Serde<A> | undefined },
  ): KeyedStream<K, A> {
    return this.process<A, { agg: ReturnType<typeof valueState<A>> }>(
      cached(
        {
          state: { agg: valueState<A>(opts?.serde ?? json<A>()) },
          onRecord(value, ctx) {
            const prev = ctx.state.agg.get();
            const next = fn(prev === undefined ? init() : prev, value, ctx);
            ctx.state.agg.set(next);
            ctx.emit(next);
          },
        },
        opts?.cache === false ? undefined : 'key',
      ),
      { name: opts?.name ?? this.app.graph.autoName('aggregate'), onError: opts?.onError },
    );
  }

  /** A running count per key; emits the new count (per record, or per key and checkpoint: `cache`). */
  count(opts?: AggregateOptions): KeyedStream<K, number> {
    return this.aggregate<number>(
      () => 0,
      (n) => n + 1,
      { name: opts?.name ?? this.app.graph.autoName('count'), onError: opts?.onError, cache: opts?.cache },
    );
  }
}

/** The store of an async stage's records in flight at a checkpoint: (sequence → record), bytes. */
function inflightStore(operator: string): StoreSpec {
  return { name: `${operator}-inflight`, stateName: INFLIGHT_STATE, descriptor: valueState(bytes()) };
}

function storesOf(
  name: string,
  state: Record<string, StateDescriptor> | undefined,
  timers: boolean,
): StoreSpec[] {
  const stores: StoreSpec[] = Object.entries(state ?? {}).map(([stateName, descriptor]) => ({
    name: `${name}-${stateName}`,
    stateName,
    descriptor,
  }));
  // Timers are state too: a changelogged store of (domain, time, key) entries.
  if (timers)
    stores.push({ name: `${name}-timers`, stateName: '__timers', descriptor: valueState<number>() });
  return stores;
}

/**
 * A table: the latest value per key of a (compacted) topic, materialized in RocksDB by each
 * operator that joins with it. Tombstones (null values) delete the row. Its records do not move
 * the watermark. @example const users = app.table('users', { value: json<User>() })
 */
export class Table<K, V> {
  /** @internal */
  readonly node: GraphNode;
  /** @internal */
  readonly stream: KeyedStream<K, V>;
  /** @internal */
  readonly valueSerde: Serde<V>;
  readonly topic: string;

  /** @internal */
  constructor(app: AppInternals, node: GraphNode, topic: string, valueSerde: Serde<V>) {
    this.node = node;
    this.topic = topic;
    this.valueSerde = valueSerde;
    this.stream = new KeyedStream<K, V>(app, node);
  }
}

/** Two keyed streams connected into one processor with shared keyed state. */
export class ConnectedStreams<K, L, Rt> {
  readonly #app: AppInternals;
  readonly #left: KeyedStream<K, L>;
  readonly #right: KeyedStream<K, Rt>;

  /** @internal */
  constructor(app: AppInternals, left: KeyedStream<K, L>, right: KeyedStream<K, Rt>) {
    this.#app = app;
    this.#left = left;
    this.#right = right;
  }

  process<R, S extends Record<string, StateDescriptor> = StateNotGiven>(
    processor: ConnectProcessor<K, L, Rt, R, S>,
    opts?: NamedOptions,
  ): KeyedStream<K, R> {
    const name = opts?.name ?? this.#app.graph.autoName('connect');
    const stores = storesOf(name, processor.state, !!processor.onTimer);
    const inner: Processor<any, any, any, any> = {
      state: processor.state,
      onRecord() {
        throw new Error('a connected processor takes records through onLeft and onRight');
      },
      ...(processor.onTimer ? { onTimer: processor.onTimer as any } : {}),
    };
    if ((processor as { [LIVE_STATE]?: boolean })[LIVE_STATE]) liveState(inner);
    const node = this.#app.graph.add(
      'process',
      {
        kind: 'process',
        processor: inner,
        stores,
        sides: { onLeft: processor.onLeft, onRight: processor.onRight },
      },
      [this.#left.node, this.#right.node],
      { name, keySerde: this.#left.node.keySerde, keyed: true },
    );
    return new KeyedStream<K, R>(this.#app, node);
  }
}

function tableJoin<K, V, T, R>(
  stream: KeyedStream<K, V>,
  table: Table<K, T>,
  joiner: (value: V, row: T | undefined, ctx: RecordContext<K>) => R,
  opts: NamedOptions | undefined,
  left: boolean,
): KeyedStream<K, R> {
  if (typeof joiner !== 'function') throw new TopologyError('join needs a joiner function');
  return stream.connect(table.stream).process(
    {
      state: { row: valueState<T>(table.valueSerde) },
      onLeft(value, ctx: ProcessContext<K, R, { row: ReturnType<typeof valueState<T>> }>) {
        const row = ctx.state.row.get();
        if (row === undefined && !left) return;
        ctx.emit(joiner(value, row, ctx));
      },
      onRight(row, ctx) {
        if (row === null || row === undefined) ctx.state.row.clear();
        else ctx.state.row.set(row);
      },
    },
    {
      name:
        opts?.name ?? stream.app_().graph.autoName(`join-${table.topic.replace(/[^A-Za-z0-9._-]/g, '_')}`),
    },
  );
}

export interface StreamJoinOptions extends NamedOptions {
  /** Records of the two sides join when their timestamps are at most this far apart (ms). */
  within: number;
  /** How long after that records are still accepted (ms of event time). Default 0. */
  grace?: number;
}

function streamJoin<K, L, Rt, R>(
  left: KeyedStream<K, L>,
  right: KeyedStream<K, Rt>,
  opts: StreamJoinOptions,
  joiner: (l: L, r: Rt, ctx: RecordContext<K>) => R,
): KeyedStream<K, R> {
  const within = opts?.within;
  const grace = opts?.grace ?? 0;
  if (!Number.isSafeInteger(within) || within < 0)
    throw new TopologyError(`a stream-stream join needs { within: ms ≥ 0 }, got ${JSON.stringify(opts)}`);
  if (!Number.isSafeInteger(grace) || grace < 0)
    throw new TopologyError(`join grace must be ≥ 0 ms, got ${grace}`);
  if (typeof joiner !== 'function') throw new TopologyError('join needs a joiner function');
  const name = opts.name ?? `join-${left.node.name}-${right.node.name}`;
  // A record is late when t + within + grace ≤ watermark. Each side buffers its records
  // (time → value, by key) until no on-time record of the other side can join them any more:
  // an on-time partner has u > W − within − grace and u ≤ t + within, so until W ≥ t + 2·within + grace.
  // The buffers are map state keyed by (time, tag), one entry per record, in time order: a record
  // costs one entry, its partners are read as a run, and pruning deletes a prefix.
  type Buf = {
    entries(): IterableIterator<[JoinBufferKey, unknown]>;
    set(k: JoinBufferKey, v: unknown): void;
    delete(k: JoinBufferKey): void;
  };
  let lastRecord = '';
  let n = 0;
  const tagOf = (c: { topic: string; partition: number; offset: string }) => {
    const at = `${c.topic}:${c.partition}:${c.offset}`;
    if (at === lastRecord) n++;
    else {
      lastRecord = at;
      n = 0;
    }
    return `${at}:${n}`;
  };
  const side = (mine: 'l' | 'r', theirs: 'l' | 'r', leftFirst: boolean) => (value: unknown, c: any) => {
    const t: number = c.timestamp;
    const w: number | undefined = c.watermark;
    if (w !== undefined && t + within + grace <= w) return c.late(value);
    (c.state[mine] as Buf).set({ t, tag: tagOf(c) }, copyValue(value));
    c.timers.atEventTime(t + within + grace);
    for (const [{ t: u }, other] of (c.state[theirs] as Buf).entries()) {
      if (u > t + within) break;
      if (u < t - within) continue;
      // The buffered partner is the stored one (live state): the user's joiner gets a copy.
      const o = copyValue(other);
      const out = leftFirst ? joiner(value as L, o as Rt, c) : joiner(o as L, value as Rt, c);
      c.emit(out, { timestamp: Math.max(t, u) });
    }
  };
  const joined = left.connect(right).process<R, any>(
    liveState({
      state: {
        l: mapState<JoinBufferKey, L>({ key: joinBufferKeySerde() }),
        r: mapState<JoinBufferKey, Rt>({ key: joinBufferKeySerde() }),
      },
      onLeft: side('l', 'r', true),
      onRight: side('r', 'l', false),
      onTimer(ts, ctx) {
        for (const s of ['l', 'r'] as const) {
          const buf = ctx.state[s] as Buf;
          const expired: JoinBufferKey[] = [];
          for (const [k] of buf.entries()) {
            if (k.t + 2 * within + grace > ts) break;
            expired.push(k);
          }
          for (const k of expired) buf.delete(k);
        }
      },
    }),
    { name },
  );
  addLate(left.app_(), joined.node, name, undefined, left.node.keySerde, json());
  return joined;
}

/** The late branch of a windowed operator: a side-output topic, or a counter of drops. */
function addLate(
  app: AppInternals,
  op: GraphNode,
  operator: string,
  topic: string | undefined,
  key: Serde<any>,
  value: Serde<any>,
): void {
  app.graph.add(
    'late',
    { kind: 'late', operator, ...(topic !== undefined ? { topic } : {}), key, value },
    [op],
    { name: `${operator}-late`, keySerde: key, keyed: false },
  );
}

/**
 * A keyed stream grouped into windows. The result is a keyed stream of `{ start, end, value }`
 * per key and window: once when the window closes (default) or on every update.
 */
export class WindowedStream<K, V> {
  readonly #parent: KeyedStream<K, V>;
  readonly #spec: WindowSpec;
  readonly #opts: WindowOptions & NamedOptions;
  readonly #late: { topic: string; serdes: Serdes<K, V> } | undefined;

  /** @internal */
  constructor(
    parent: KeyedStream<K, V>,
    spec: WindowSpec,
    opts: WindowOptions & NamedOptions,
    late?: { topic: string; serdes: Serdes<K, V> },
  ) {
    this.#parent = parent;
    this.#spec = spec;
    this.#opts = opts;
    this.#late = late;
  }

  /** Sends late records (their windows closed) to `topic` instead of dropping them. */
  late(topic: string, serdes: Serdes<K, V> = {}): WindowedStream<K, V> {
    if (!topic || /\s/.test(topic)) throw new TopologyError(`invalid topic name ${JSON.stringify(topic)}`);
    return new WindowedStream<K, V>(this.#parent, this.#spec, this.#opts, { topic, serdes });
  }

  /** Records per window. */
  count(opts?: NamedOptions): KeyedStream<K, Windowed<number>> {
    return this.#build(
      {
        init: () => 0,
        add: (n: number) => n + 1,
        merge: (a: number, b: number) => a + b,
        result: (n: number) => n,
      },
      'count',
      opts?.name,
    );
  }

  /** Combines the values of a window pairwise. */
  reduce(fn: (acc: V, value: V) => V, opts?: NamedOptions): KeyedStream<K, Windowed<V>> {
    return this.#build(
      {
        init: () => null,
        add: (acc: V | null, v: V) => (acc === null || acc === undefined ? v : fn(acc, v)),
        merge: (a: V | null, b: V | null) =>
          a === null || a === undefined ? b : b === null || b === undefined ? a : fn(a, b),
        result: (acc: V | null) => (acc === null ? undefined : acc),
      },
      'reduce',
      opts?.name,
    );
  }

  /**
   * Folds the values of a window from `init()`. Session windows also need `merge` (two sessions
   * bridged by a record become one). Accumulators are stored as JSON.
   */
  aggregate<A>(
    init: () => A,
    add: (acc: A, value: V, ctx: RecordContext<K>) => A,
    opts: NamedOptions & { merge?: (a: A, b: A) => A } = {},
  ): KeyedStream<K, Windowed<A>> {
    return this.#build(
      { init, add, ...(opts.merge ? { merge: opts.merge } : {}), result: (a: A) => a },
      'aggregate',
      opts.name,
    );
  }

  /**
   * Calls `fn` with every value of a window (in arrival order) when it closes (or on each update);
   * emits what it returns unless undefined. Values are stored as JSON until then.
   */
  process<R>(
    fn: (values: V[], window: WindowBounds, key: K) => R | undefined,
    opts?: NamedOptions,
  ): KeyedStream<K, Windowed<R>> {
    return this.#build(
      {
        init: () => [] as V[],
        add: (acc: V[], v: V) => {
          acc.push(v);
          return acc;
        },
        merge: (a: V[], b: V[]) => a.concat(b),
        result: (acc: V[], w: WindowBounds, key: unknown) => fn(acc, w, key as K),
      },
      'process',
      opts?.name,
    );
  }

  #build<R>(fold: WindowFold<any, any, any>, what: string, named?: string): KeyedStream<K, Windowed<R>> {
    const parent = this.#parent;
    const name = named ?? this.#opts.name ?? parent.app_().graph.autoName(`window-${what}`);
    // Updates (emit: 'update') go through the record cache, one per key and window per checkpoint.
    const mode = this.#opts.emit === 'update' && this.#opts.cache !== false ? 'window' : undefined;
    const out = parent.process<Windowed<R>, any>(
      cached(liveState(windowProcessor(this.#spec, fold, this.#opts)), mode) as any,
      {
        name,
      },
    );
    addLate(
      parent.app_(),
      out.node,
      name,
      this.#late?.topic,
      this.#late?.serdes.key ?? parent.node.keySerde,
      this.#late?.serdes.value ?? parent.node.valueSerde ?? jsonOrBytes(),
    );
    return out as KeyedStream<K, Windowed<R>>;
  }
}
