import { TopologyError } from '../errors.js';
import { buildTopology, type Topology } from '../topology/build.js';
import { GraphBuilder } from '../topology/nodes.js';
import { bytes, type Serdes, string } from './serdes.js';
import { type KeyedStream, Stream } from './stream.js';

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

  /** Reads a topic. Keys default to UTF-8 strings and values to raw bytes unless serdes are given. */
  stream<K = string, V = Buffer>(topic: string, serdes: Serdes<K, V> = {}): Stream<K, V> {
    if (this.#topology) throw new TopologyError('the topology is already built; add streams before starting');
    const key = serdes.key ?? string();
    const value = serdes.value ?? bytes();
    const node = this.graph.add(
      'source',
      { kind: 'source', topics: [topic], key, value, internal: false },
      [],
      {
        keySerde: key,
        keyed: false,
      },
    );
    return new Stream<K, V>({ id: this.id, graph: this.graph }, node);
  }

  /** Reads a topic whose records are already partitioned by key (keyed state allowed at once). */
  keyedStream<K = string, V = Buffer>(topic: string, serdes: Serdes<K, V> = {}): KeyedStream<K, V> {
    return this.stream(topic, serdes).byKey();
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
