import { TopologyError } from '../errors.js';
import { repartitionTopic } from '../topology/build.js';
import type { GraphBuilder, GraphNode, StoreSpec } from '../topology/nodes.js';
import type { Processor, RecordContext } from './context.js';
import { json, type Serde, type Serdes, string } from './serdes.js';
import { type StateDescriptor, valueState } from './state.js';

export interface AppInternals {
  readonly id: string;
  readonly graph: GraphBuilder;
}

export interface NamedOptions {
  /** A stable name (used for internal topics and stores; keep it when you change the job). */
  name?: string;
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

  protected next<K2, V2>(
    spec: GraphNode['spec'],
    opts: { name?: string | undefined; keySerde?: Serde<any>; keyed?: boolean } = {},
  ): Stream<K2, V2> {
    const node = this.app.graph.add(spec.kind, spec, [this.node], {
      name: opts.name,
      keySerde: opts.keySerde ?? this.node.keySerde,
      keyed: opts.keyed ?? this.node.keyed,
    });
    return this.node.keyed && (opts.keyed ?? true)
      ? new KeyedStream<K2, V2>(this.app, node)
      : new Stream<K2, V2>(this.app, node);
  }

  /** Transforms each value; the key stays. */
  map<R>(
    fn: (value: V, ctx: RecordContext<K>) => R,
    opts?: NamedOptions,
  ): this extends KeyedStream<K, V> ? KeyedStream<K, R> : Stream<K, R> {
    return this.next({ kind: 'map', fn }, { name: opts?.name }) as any;
  }

  /** Keeps the records for which `fn` is true. */
  filter(fn: (value: V, ctx: RecordContext<K>) => boolean, opts?: NamedOptions): this {
    return this.next({ kind: 'filter', fn }, { name: opts?.name }) as any;
  }

  /** Zero, one or many values per record, each with the record's key. */
  flatMap<R>(
    fn: (value: V, ctx: RecordContext<K>) => Iterable<R>,
    opts?: NamedOptions,
  ): this extends KeyedStream<K, V> ? KeyedStream<K, R> : Stream<K, R> {
    return this.next({ kind: 'flatMap', fn }, { name: opts?.name }) as any;
  }

  /** Sees each record without changing it (metrics, debugging). */
  peek(fn: (value: V, ctx: RecordContext<K>) => void, opts?: NamedOptions): this {
    return this.next({ kind: 'peek', fn }, { name: opts?.name }) as any;
  }

  /** One stream of the records of this stream and the others (same sub-topology, same task). */
  merge(...others: Stream<K, V>[]): Stream<K, V> {
    const parents = [this.node, ...others.map((o) => o.node)];
    const keyed = parents.every((p) => p.keyed);
    const node = this.app.graph.add('merge', { kind: 'merge' }, parents, {
      keySerde: this.node.keySerde,
      keyed,
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
   */
  keyBy<K2>(
    fn: (value: V, ctx: RecordContext<K>) => K2,
    opts: NamedOptions & { key?: Serde<K2>; value?: Serde<V> } = {},
  ): KeyedStream<K2, V> {
    const keySerde = opts.key ?? (string() as unknown as Serde<K2>);
    const valueSerde = opts.value ?? json<V>();
    const base = opts.name ?? `keyby-${this.app.graph.nodes.length}`;
    const topic = repartitionTopic(this.app.id, base);
    const select = this.app.graph.add('selectKey', { kind: 'selectKey', fn }, [this.node], {
      name: `${base}-select`,
      keySerde,
      keyed: false,
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
      { name: `${base}-source`, keySerde, keyed: true },
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
    });
    return new KeyedStream<K, V>(this.app, node);
  }

  /**
   * A load-shedding point. Under overload (`overload.mode: shed | divert` with
   * `overload.placement: operator`) the worker drops here the fraction of records that keeps it
   * within its headroom: at random, or (with `overload.drop: priority`) those of lowest
   * `priority(value)` first. In divert mode the dropped records go to `<appId>-overflow`, keyed
   * as here, the value serialized with `value` (JSON by default). Otherwise records pass through.
   * Place it before the expensive operators: shedding after them saves nothing.
   * @example stream.shed({ priority: (order) => order.amount }).map(enrich).to('enriched')
   */
  shed(
    opts: NamedOptions & { priority?: (value: V, ctx: RecordContext<K>) => number; value?: Serde<V> } = {},
  ): this {
    return this.next(
      { kind: 'shed', priority: opts.priority as any, value: opts.value },
      { name: opts.name },
    ) as any;
  }

  /** Writes the stream to a topic. The key serde defaults to the stream's, the value serde to JSON. */
  to(topic: string, serdes: Serdes<K, V> = {}, opts?: NamedOptions): void {
    if (!topic || /\s/.test(topic)) throw new TopologyError(`invalid topic name ${JSON.stringify(topic)}`);
    this.app.graph.add(
      'sink',
      {
        kind: 'sink',
        topic,
        key: serdes.key ?? this.node.keySerde,
        value: serdes.value ?? json<V>(),
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
   * Runs a processor with keyed state and timers.
   * @example
   * .process<Alert>({
   *   state: { last: valueState<number>() },
   *   onRecord(r, ctx) { const prev = ctx.state.last.get(); ctx.state.last.set(r.temp); if (prev !== undefined) ctx.emit({ prev, now: r.temp }); },
   * })
   */
  process<R, S extends Record<string, StateDescriptor> = any>(
    processor: Processor<K, V, R, S>,
    opts?: NamedOptions,
  ): KeyedStream<K, R> {
    const name = opts?.name ?? `process-${this.app.graph.nodes.length}`;
    const stores: StoreSpec[] = Object.entries(processor.state ?? {}).map(([stateName, descriptor]) => ({
      name: `${name}-${stateName}`,
      stateName,
      descriptor: descriptor as StateDescriptor,
    }));
    if (processor.onTimer) {
      // Timers are state too: a changelogged store of (domain, time, key) entries.
      stores.push({ name: `${name}-timers`, stateName: '__timers', descriptor: valueState<number>() });
    }
    return this.next({ kind: 'process', processor: processor as any, stores }, { name }) as KeyedStream<K, R>;
  }

  /** A running reduction per key; emits the new value for every record. */
  reduce(
    fn: (acc: V, value: V, ctx: RecordContext<K>) => V,
    opts?: NamedOptions & { serde?: Serde<V> },
  ): KeyedStream<K, V> {
    return this.aggregate<V>(
      () => undefined as unknown as V,
      (acc, v, ctx) => (acc === undefined ? v : fn(acc, v, ctx)),
      {
        name: opts?.name ?? `reduce-${this.app.graph.nodes.length}`,
        serde: opts?.serde,
      },
    );
  }

  /** A running aggregate per key, from `init()`; emits the new aggregate for every record. */
  aggregate<A>(
    init: () => A,
    fn: (acc: A, value: V, ctx: RecordContext<K>) => A,
    opts?: NamedOptions & { serde?: Serde<A> | undefined },
  ): KeyedStream<K, A> {
    return this.process<A, { agg: ReturnType<typeof valueState<A>> }>(
      {
        state: { agg: valueState<A>(opts?.serde ?? json<A>()) },
        onRecord(value, ctx) {
          const prev = ctx.state.agg.get();
          const next = fn(prev === undefined ? init() : prev, value, ctx);
          ctx.state.agg.set(next);
          ctx.emit(next);
        },
      },
      { name: opts?.name ?? `aggregate-${this.app.graph.nodes.length}` },
    );
  }

  /** A running count per key; emits the new count for every record. */
  count(opts?: NamedOptions): KeyedStream<K, number> {
    return this.aggregate<number>(
      () => 0,
      (n) => n + 1,
      { name: opts?.name ?? `count-${this.app.graph.nodes.length}` },
    );
  }
}
