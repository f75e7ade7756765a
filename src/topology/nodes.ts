import type { AsyncContext, AsyncSettings } from '../api/async.js';
import type { Processor, RecordContext } from '../api/context.js';
import type { Serde } from '../api/serdes.js';
import type { StateDescriptor } from '../api/state.js';

/**
 * The graph the DSL builds: operators are nodes; a node's children receive what it emits.
 * Repartition topics cut the graph into sub-topologies (see build.ts).
 */
export type NodeSpec =
  | {
      kind: 'source';
      topics: string[];
      key: Serde<any>;
      value: Serde<any>;
      internal: boolean;
      /** Event time of a record: the Kafka timestamp (absent), the wall clock, or extracted. */
      timestamp?: TimestampSpec;
      /** A table's changelog input: its updates do not move the watermark. */
      table?: boolean;
    }
  | { kind: 'map'; fn: (value: any, ctx: RecordContext<any>) => any }
  | { kind: 'filter'; fn: (value: any, ctx: RecordContext<any>) => boolean }
  | { kind: 'flatMap'; fn: (value: any, ctx: RecordContext<any>) => Iterable<any> }
  | { kind: 'peek'; fn: (value: any, ctx: RecordContext<any>) => void }
  | { kind: 'selectKey'; fn: (value: any, ctx: RecordContext<any>) => any }
  | { kind: 'merge' }
  | {
      kind: 'process';
      processor: Processor<any, any, any, Record<string, StateDescriptor>>;
      stores: StoreSpec[];
      /** Two inputs (`connect`): records of parents[0] go to onLeft, of parents[1] to onRight. */
      sides?: ConnectHandlers;
      /** An async `onRecord` (it returns a Promise): runs as an async stage (async-stage.ts). */
      async?: AsyncSettings;
    }
  /**
   * `mapAsync`, `filterAsync`, `flatMapAsync`: the user function returns a Promise. Its one store
   * (`<name>-inflight`) holds the records in the stage when a checkpoint is taken.
   */
  | {
      kind: 'async';
      op: 'map' | 'filter' | 'flatMap';
      fn: (value: any, ctx: AsyncContext<any>) => unknown;
      settings: AsyncSettings;
      stores: StoreSpec[];
    }
  /** Records a windowed operator found late: to a side-output topic, or dropped; counted either way. */
  | { kind: 'late'; operator: string; topic?: string; key: Serde<any>; value: Serde<any> }
  | { kind: 'sink'; topic: string; key: Serde<any>; value: Serde<any>; internal: boolean }
  | {
      kind: 'shed';
      priority: ((value: any, ctx: RecordContext<any>) => number) | undefined;
      value: Serde<any> | undefined;
    };

export type NodeKind = NodeSpec['kind'];

/** The stores of a node (a `process` or an async stage's), none for the others. */
export function storesOfNode(n: GraphNode): readonly StoreSpec[] {
  return n.spec.kind === 'process' || n.spec.kind === 'async' ? n.spec.stores : [];
}

/** Name in the `state` object of an async stage's store of the records in flight. */
export const INFLIGHT_STATE = '__inflight';

export type TimestampSpec = 'processing' | ((value: any, ctx: RecordContext<any>) => number);

export interface ConnectHandlers {
  onLeft(value: any, ctx: any): void;
  onRight(value: any, ctx: any): void;
}
/**
 * What happens to a record that cannot be read or whose operator throws: `dlq` writes it to
 * `<appId>-dlq` with error headers, `skip` counts and drops it, `fail` stops the worker.
 */
export type ErrorPolicy = 'dlq' | 'skip' | 'fail';
export const ERROR_POLICIES: readonly ErrorPolicy[] = ['dlq', 'skip', 'fail'];

export interface StoreSpec {
  /** Store name, unique in the app: `<operator>-<state>`; the changelog is `<appId>-<name>-changelog`. */
  name: string;
  /** Name of the state in the operator's `state` object. */
  stateName: string;
  descriptor: StateDescriptor;
}

export interface GraphNode {
  readonly id: number;
  readonly name: string;
  /**
   * True when the DSL made the name up from the node's position (`count-4`): adding an operator
   * before it shifts it, and with it the names of its stores, changelogs and repartition topic.
   */
  readonly generatedName?: boolean;
  readonly spec: NodeSpec;
  readonly parents: GraphNode[];
  readonly children: GraphNode[];
  /** Serde of the key of records leaving this node (for sinks downstream). */
  readonly keySerde: Serde<any>;
  /** True when records leaving this node are partitioned by their key (keyed state is allowed). */
  readonly keyed: boolean;
  /**
   * Serde of the values leaving this node while they are still the source's (after filter, peek,
   * shed, byKey): sinks and repartitions default to it, so bytes in are bytes out. Absent after an
   * operator that makes new values (map, process, ...).
   */
  readonly valueSerde?: Serde<any> | undefined;
  /** This operator's error policy; the app's `processing.errorPolicy` when absent. */
  readonly onError?: ErrorPolicy | undefined;
}

/** Node naming and registration, shared by the App and its streams. */
export class GraphBuilder {
  readonly nodes: GraphNode[] = [];
  readonly #names = new Set<string>();
  /** Names made up by {@link autoName}: the operators named so, and those named after them. */
  readonly #generated = new Set<string>();

  /**
   * A name for an operator the user did not name: `<prefix>-<position>`. It moves when an
   * operator is added before it, so a stateful operator or a repartition named so loses its state
   * and topics on such a redeploy; the topology warns about them ({@link Topology.warnings}).
   */
  autoName(prefix: string): string {
    const name = `${prefix}-${this.nodes.length}`;
    this.#generated.add(name);
    return name;
  }

  #isGenerated(name: string): boolean {
    if (this.#generated.has(name)) return true;
    for (const g of this.#generated) if (name.startsWith(`${g}-`)) return true;
    return false;
  }

  add(
    kind: NodeKind,
    spec: NodeSpec,
    parents: GraphNode[],
    opts: {
      name?: string | undefined;
      keySerde: Serde<any>;
      keyed: boolean;
      valueSerde?: Serde<any> | undefined;
      onError?: ErrorPolicy | undefined;
      /** Default: true when no name is given. */
      generated?: boolean | undefined;
    },
  ): GraphNode {
    const id = this.nodes.length;
    const generated = opts.generated ?? (opts.name === undefined || this.#isGenerated(opts.name));
    const name = opts.name ?? `${kind}-${id}`;
    if (this.#names.has(name)) throw new Error(`duplicate operator name ${JSON.stringify(name)}`);
    if (!/^[A-Za-z0-9._-]+$/.test(name)) {
      throw new Error(
        `operator name ${JSON.stringify(name)} may only hold letters, digits, '.', '_' and '-'`,
      );
    }
    if (opts.onError !== undefined && !ERROR_POLICIES.includes(opts.onError)) {
      throw new Error(
        `operator ${JSON.stringify(name)}: onError must be one of ${ERROR_POLICIES.join(', ')}, got ${JSON.stringify(opts.onError)}`,
      );
    }
    this.#names.add(name);
    const node: GraphNode = {
      id,
      name,
      spec,
      parents,
      children: [],
      keySerde: opts.keySerde,
      keyed: opts.keyed,
      ...(generated ? { generatedName: true } : {}),
      ...(opts.valueSerde !== undefined ? { valueSerde: opts.valueSerde } : {}),
      ...(opts.onError !== undefined ? { onError: opts.onError } : {}),
    };
    for (const p of parents) p.children.push(node);
    this.nodes.push(node);
    return node;
  }
}
