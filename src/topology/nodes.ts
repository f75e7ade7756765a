import type { Processor, RecordContext } from '../api/context.js';
import type { Serde } from '../api/serdes.js';
import type { StateDescriptor } from '../api/state.js';

/**
 * The graph the DSL builds: operators are nodes; a node's children receive what it emits.
 * Repartition topics cut the graph into sub-topologies (see build.ts).
 */
export type NodeSpec =
  | { kind: 'source'; topics: string[]; key: Serde<any>; value: Serde<any>; internal: boolean }
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
    }
  | { kind: 'sink'; topic: string; key: Serde<any>; value: Serde<any>; internal: boolean }
  | {
      kind: 'shed';
      priority: ((value: any, ctx: RecordContext<any>) => number) | undefined;
      value: Serde<any> | undefined;
    };

export type NodeKind = NodeSpec['kind'];

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
  readonly spec: NodeSpec;
  readonly parents: GraphNode[];
  readonly children: GraphNode[];
  /** Serde of the key of records leaving this node (for sinks downstream). */
  readonly keySerde: Serde<any>;
  /** True when records leaving this node are partitioned by their key (keyed state is allowed). */
  readonly keyed: boolean;
}

/** Node naming and registration, shared by the App and its streams. */
export class GraphBuilder {
  readonly nodes: GraphNode[] = [];
  readonly #names = new Set<string>();

  add(
    kind: NodeKind,
    spec: NodeSpec,
    parents: GraphNode[],
    opts: { name?: string | undefined; keySerde: Serde<any>; keyed: boolean },
  ): GraphNode {
    const id = this.nodes.length;
    const name = opts.name ?? `${kind}-${id}`;
    if (this.#names.has(name)) throw new Error(`duplicate operator name ${JSON.stringify(name)}`);
    if (!/^[A-Za-z0-9._-]+$/.test(name)) {
      throw new Error(
        `operator name ${JSON.stringify(name)} may only hold letters, digits, '.', '_' and '-'`,
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
    };
    for (const p of parents) p.children.push(node);
    this.nodes.push(node);
    return node;
  }
}
