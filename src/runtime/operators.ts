import type { Serde } from '../api/serdes.js';
import { OperatorError } from '../errors.js';
import type { GraphNode } from '../topology/nodes.js';
import type { MutableRecordContext } from './record-context.js';

/** A compiled operator: takes one record (the context holds its metadata) and pushes it on. */
export interface Op {
  push(key: unknown, value: unknown): void;
  /** Two-input operators (`connect`): a record from input `side` (0 left, 1 right). */
  side?(side: number, key: unknown, value: unknown): void;
}

/** What operators report to the task besides records. */
export interface OperatorHooks {
  late(operator: string, action: 'dropped' | 'side_output'): void;
}

/** Where sink operators put serialized records; the task's collector. */
export interface Emitter {
  emit(
    topic: string,
    key: Buffer | null,
    value: Buffer | null,
    timestamp: number,
    headers: Record<string, unknown> | undefined,
  ): void;
}

/**
 * Builds the operator for a `process` node; supplied by the task, which owns the state. `late`
 * receives the records a windowed operator found late (its `late` children).
 */
export type ProcessOpFactory = (node: GraphNode, downstream: Op, late: Op) => Op;
/** Builds the operator for a `.shed()` point; supplied by the task, which owns the shedder. */
export type ShedOpFactory = (node: GraphNode, downstream: Op) => Op;

function fanOut(children: Op[]): Op {
  if (children.length === 1) return children[0]!;
  if (children.length === 0) return { push() {} };
  return {
    push(k, v) {
      for (let i = 0; i < children.length; i++) children[i]!.push(k, v);
    },
  };
}

/**
 * Counts the records pushed into an operator, for the status page's per-operator rates. One
 * typed-array increment per operator per record; no labels, no allocation.
 */
function counted(op: Op, id: number, counts: Float64Array): Op {
  const wrapped: Op = {
    push(k, v) {
      counts[id] = (counts[id] as number) + 1;
      op.push(k, v);
    },
  };
  // Two-input operators take records through `side`: count those too.
  if (op.side) {
    const side = op.side.bind(op);
    wrapped.side = (i, k, v) => {
      counts[id] = (counts[id] as number) + 1;
      side(i, k, v);
    };
  }
  return wrapped;
}

/**
 * Names the operator that threw, with its error policy. An error from further down the chain
 * passes through untouched: it was named where it was thrown, since every operator is guarded.
 */
function guard(node: GraphNode, op: Op): Op {
  const name = node.name;
  const policy = node.onError;
  const guarded: Op = {
    push(k, v) {
      try {
        op.push(k, v);
      } catch (e) {
        throw e instanceof OperatorError ? e : new OperatorError(name, e, policy);
      }
    },
  };
  if (op.side) {
    const side = op.side.bind(op);
    guarded.side = (i, k, v) => {
      try {
        side(i, k, v);
      } catch (e) {
        throw e instanceof OperatorError ? e : new OperatorError(name, e, policy);
      }
    };
  }
  return guarded;
}

/**
 * Compiles a sub-topology's graph, from each source down, into chains of closures. Shared
 * children (merge) are compiled once.
 */
export function compileOperators(
  sources: ReadonlyMap<string, GraphNode>,
  rc: MutableRecordContext,
  emitter: Emitter,
  processOp: ProcessOpFactory,
  hooks: OperatorHooks = { late() {} },
  counts?: Float64Array,
  shedOp?: ShedOpFactory,
  wrap?: (node: GraphNode, op: Op) => Op,
): Map<string, Op> {
  const compiled = new Map<number, Op>();
  // A child with two inputs learns which one a record came from.
  const edge = (parent: GraphNode, child: GraphNode): Op => {
    const op = compile(child);
    if (child.spec.kind !== 'process' || !child.spec.sides) return op;
    const i = child.parents.indexOf(parent);
    return { push: (k, v) => op.side!(i, k, v) };
  };
  const compile = (node: GraphNode): Op => {
    const done = compiled.get(node.id);
    if (done) return done;
    const next = fanOut(node.children.filter((c) => c.spec.kind !== 'late').map((c) => edge(node, c)));
    const s = node.spec;
    let op: Op;
    switch (s.kind) {
      case 'source':
      case 'merge':
        op = next;
        break;
      case 'map': {
        const fn = s.fn;
        op = {
          push(k, v) {
            rc.key = k;
            next.push(k, fn(v, rc));
          },
        };
        break;
      }
      case 'filter': {
        const fn = s.fn;
        op = {
          push(k, v) {
            rc.key = k;
            if (fn(v, rc)) next.push(k, v);
          },
        };
        break;
      }
      case 'flatMap': {
        const fn = s.fn;
        op = {
          push(k, v) {
            rc.key = k;
            for (const r of fn(v, rc)) next.push(k, r);
          },
        };
        break;
      }
      case 'peek': {
        const fn = s.fn;
        op = {
          push(k, v) {
            rc.key = k;
            fn(v, rc);
            next.push(k, v);
          },
        };
        break;
      }
      case 'selectKey': {
        const fn = s.fn;
        op = {
          push(k, v) {
            rc.key = k;
            const nk = fn(v, rc);
            rc.key = nk;
            next.push(nk, v);
          },
        };
        break;
      }
      case 'process':
        op = processOp(node, next, fanOut(node.children.filter((c) => c.spec.kind === 'late').map(compile)));
        break;
      case 'late': {
        const { topic, operator } = s;
        const ks: Serde<unknown> = s.key;
        const vs: Serde<unknown> = s.value;
        op = {
          push(k, v) {
            if (topic === undefined) return hooks.late(operator, 'dropped');
            emitter.emit(
              topic,
              k === null || k === undefined ? null : ks.serialize(k),
              vs.serialize(v),
              rc.timestamp,
              rc.headers,
            );
            hooks.late(operator, 'side_output');
          },
        };
        break;
      }
      case 'shed':
        op = shedOp ? shedOp(node, next) : next;
        break;
      case 'sink': {
        const topic = s.topic;
        const ks: Serde<unknown> = s.key;
        const vs: Serde<unknown> = s.value;
        op = {
          push(k, v) {
            emitter.emit(
              topic,
              k === null || k === undefined ? null : ks.serialize(k),
              vs.serialize(v),
              rc.timestamp,
              rc.headers,
            );
          },
        };
        break;
      }
    }
    if (s.kind !== 'source' && s.kind !== 'merge') op = guard(node, op);
    if (wrap) op = wrap(node, op);
    if (counts && node.id < counts.length) op = counted(op, node.id, counts);
    compiled.set(node.id, op);
    return op;
  };
  const out = new Map<string, Op>();
  for (const [topic, node] of sources) out.set(topic, compile(node));
  return out;
}
