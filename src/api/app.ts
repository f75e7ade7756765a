import { TopologyError } from '../errors.js';
import { buildTopology, type Topology } from '../topology/build.js';
import { GraphBuilder } from '../topology/nodes.js';
import type { RecordContext } from './context.js';
import { bytes, json, type Serde, type Serdes, string } from './serdes.js';
import { type KeyedStream, Stream, Table } from './stream.js';

export interface StreamOptions<K, V> extends Serdes<K, V> {
  /**
   * Event time: the Kafka timestamp (default), `'processing'` (wall clock), or extracted from the
   * value (typed by the value serde: `timestamp: (c) => c.ts` with `value: json<Click>()`).
   */
  timestamp?: 'processing' | ((value: V, ctx: RecordContext<K>) => number);
}

/**
 * The options of a read: optional while the types are the defaults (string keys, Buffer values),
 * else with the serdes that make them so; `app.stream<string, Click>('clicks')` alone would read
 * Buffers typed as Clicks.
 */
export type SerdesFor<K, V, O> = [string] extends [K]
  ? [Buffer] extends [V]
    ? [opts?: O]
    : [opts: O & { value: Serde<V> }]
  : [Buffer] extends [V]
    ? [opts: O & { key: Serde<K> }]
    : [opts: O & { key: Serde<K>; value: Serde<V> }];

export interface AppOptions {
  /** The application id: the consumer group id and the prefix of every internal topic. */
  id: string;
}

/**
 * A stream processing job. A job file's default export is an App; `sluice run job.js` runs one
 * worker of it, and more processes of the same job share the work.
 * @example
 * const app = new App({ id: 'page-views' });
 * app.stream('clicks', { value: json<Click>() }).filter((c) => !c.bot).to('human-clicks');
 * export default app;
 */
export class App {
  readonly id: string;
  /** @internal */
  readonly graph = new GraphBuilder();
  #topology: Topology | undefined;

  constructor(opts: AppOptions) {
    if (!opts || typeof opts.id !== 'string' || !/^[A-Za-z0-9._-]{1,200}$/.test(opts.id)) {
      throw new TopologyError(
        `App id must be 1-200 letters, digits, '.', '_' or '-'; got ${JSON.stringify(opts?.id)}`,
      );
    }
    this.id = opts.id;
  }

  /**
   * Reads a topic. Keys default to UTF-8 strings and values to raw bytes unless serdes are given.
   * Event time is the Kafka timestamp unless `timestamp` extracts one from the record (or is
   * `'processing'`: the wall clock when the record is processed).
   * @example app.stream('trades', { value: json<Trade>(), timestamp: (t) => t.executedAt })
   */
  stream<K = string, V = Buffer>(topic: string, ...rest: SerdesFor<K, V, StreamOptions<K, V>>): Stream<K, V> {
    const opts: StreamOptions<K, V> = rest[0] ?? {};
    if (this.#topology) throw new TopologyError('the topology is already built; add streams before starting');
    const key = opts.key ?? string();
    const value = opts.value ?? bytes();
    const ts = opts.timestamp;
    if (ts !== undefined && ts !== 'processing' && typeof ts !== 'function')
      throw new TopologyError(`timestamp must be 'processing' or a function, got ${JSON.stringify(ts)}`);
    const node = this.graph.add(
      'source',
      {
        kind: 'source',
        topics: [topic],
        key,
        value,
        internal: false,
        ...(ts !== undefined ? { timestamp: ts } : {}),
      },
      [],
      {
        keySerde: key,
        keyed: false,
        valueSerde: value,
      },
    );
    return new Stream<K, V>({ id: this.id, graph: this.graph }, node);
  }

  /**
   * A table over a topic keyed like the streams that join it (the latest value per key; a null
   * value deletes). Values default to JSON. @example const users = app.table('users', { value: json<User>() })
   */
  table<K = string, V = unknown>(topic: string, serdes: Serdes<K, V> = {}): Table<K, V> {
    if (this.#topology) throw new TopologyError('the topology is already built; add tables before starting');
    const key = serdes.key ?? string();
    const value = serdes.value ?? (json() as Serde<V>);
    const node = this.graph.add(
      'source',
      { kind: 'source', topics: [topic], key, value, internal: false, table: true },
      [],
      {
        name: `table-${topic.replace(/[^A-Za-z0-9._-]/g, '_')}`,
        keySerde: key,
        keyed: true,
        valueSerde: value,
      },
    );
    return new Table<K, V>({ id: this.id, graph: this.graph }, node, topic, value);
  }

  /** Reads a topic whose records are already partitioned by key (keyed state allowed at once). */
  keyedStream<K = string, V = Buffer>(
    topic: string,
    ...rest: SerdesFor<K, V, Serdes<K, V>>
  ): KeyedStream<K, V> {
    return this.stream<K, V>(topic, ...(rest as unknown as SerdesFor<K, V, StreamOptions<K, V>>)).byKey();
  }

  /** The built topology (sub-topologies, internal topics, stores). Built once. */
  topology(): Topology {
    this.#topology ??= buildTopology(this.id, this.graph.nodes);
    return this.#topology;
  }
}

export function isApp(x: unknown): x is App {
  return (
    x instanceof App ||
    (typeof x === 'object' &&
      x !== null &&
      typeof (x as App).topology === 'function' &&
      typeof (x as App).id === 'string')
  );
}
