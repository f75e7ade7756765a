import { isThenable } from '../api/async.js';
import type { Serde } from '../api/serdes.js';
import { isSluiceFault, OperatorError } from '../errors.js';
import type { GraphNode } from '../topology/nodes.js';
import { keyBytesOf, type MutableRecordContext, memoFormat } from './record-context.js';

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
/** Builds an async stage (mapAsync, ..., an async process); supplied by the task (async-ops.ts). */
export type AsyncOpFactory = (node: GraphNode, downstream: Op) => Op;

/**
 * A synchronous operator's function returned a Promise: its value would go on as `{}`. Fails the
 * worker at the first record (an error of the job, not of the record), naming the async operator
 * to use instead.
 */
export function promiseReturned(node: GraphNode, instead: string): OperatorError {
  return new OperatorError(
    node.name,
    new TypeError(
      `the ${node.spec.kind} function of operator ${node.name} returned a Promise; a ${node.spec.kind} must be synchronous: use ${instead} for an async function`,
    ),
    'fail',
  );
}

function fanOut(children: Op[]): Op {
  if (children.length === 1) return children[0]!;
  if (children.length === 0) return { push() {} };
  return {
    push(k, v) {
      for (let i = 0; i < children.length; i++) children[i]!.push(k, v);
    },
  };
}

/** A two-input operator's inputs (it takes records through `side`): input i pushes into side i. */
function sideInputs(op: Op, n: number): Op[] {
  return Array.from({ length: n }, (_, i): Op => ({ push: (k, v) => op.side!(i, k, v) }));
}

/** Where an operator's timed pushes add up: milliseconds in all, and how many pushes. */
export interface CostAccount {
  ms: number;
  n: number;
}

/** Times operators on sampled records: the task's `OperatorCostSampler`. */
export interface CostProbe {
  /** True while the current record is being timed; read once per operator per record. */
  readonly on: boolean;
  /** A fresh account for an operator's timed pushes; called once per operator per compilation. */
  track(node: GraphNode): CostAccount;
}

/**
 * Wraps each input of an operator (one, or a two-input operator's two) in the one closure that
 * does, per record:
 * - count it into `counts[node.id]`, for the status page's per-operator rates (one typed-array
 *   increment, no labels, no allocation), when `counts` has the slot;
 * - time it when the probe samples the record, downstream operators included (the sampler
 *   subtracts their time when it collects);
 * - name the operator if it throws, with its error policy. An error from further down the chain
 *   passes through untouched: it was named where it was thrown, since every operator is
 *   instrumented. So does a fault of Sluice or the machine (`isSluiceFault`: a `StateIoError`
 *   from a state read inside the user function), which is never the user's error.
 * Sources and merges are pass-throughs: counted, neither timed nor naming. A two-input
 * operator's inputs share its count slot and its cost account.
 */
function instrument(
  node: GraphNode,
  inputs: Op[],
  counts: Float64Array | undefined,
  costs: CostProbe | undefined,
): Op[] {
  const id = node.id;
  const count = counts && id < counts.length ? counts : undefined;
  const passThrough = node.spec.kind === 'source' || node.spec.kind === 'merge';
  if (passThrough && !count) return inputs;
  const name = node.name;
  const policy = node.onError;
  const probe = passThrough ? undefined : costs;
  const account = probe?.track(node);
  return inputs.map((op) => ({
    push(k, v) {
      if (count) count[id] = (count[id] as number) + 1;
      const t = probe?.on ? performance.now() : -1;
      try {
        op.push(k, v);
      } catch (e) {
        // A fault of Sluice or the machine (a state read inside the user function) is not the
        // user's: it passes unnamed, so the task resets instead of dead-lettering the record.
        throw passThrough || e instanceof OperatorError || isSluiceFault(e)
          ? e
          : new OperatorError(name, e, policy);
      } finally {
        if (t >= 0) {
          account!.ms += performance.now() - t;
          account!.n++;
        }
      }
    },
  }));
}

/**
 * Compiles a sub-topology's graph, from each source down, into chains of closures, each operator
 * instrumented (`instrument`). Shared children (merge) are compiled once.
 */
export function compileOperators(
  sources: ReadonlyMap<string, GraphNode>,
  rc: MutableRecordContext,
  emitter: Emitter,
  processOp: ProcessOpFactory,
  hooks: OperatorHooks = { late() {} },
  counts?: Float64Array,
  shedOp?: ShedOpFactory,
  costs?: CostProbe,
  asyncOp?: AsyncOpFactory,
): Map<string, Op> {
  /** Each node's inputs, instrumented: one, or one per parent for a two-input operator. */
  const compiled = new Map<number, Op[]>();
  // What a parent pushes into: the child's input that the parent feeds.
  const edge = (parent: GraphNode, child: GraphNode): Op => {
    const inputs = compile(child);
    return inputs[inputs.length === 1 ? 0 : child.parents.indexOf(parent)]!;
  };
  const compile = (node: GraphNode): Op[] => {
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
            const r = fn(v, rc);
            if (typeof r === 'object' && isThenable(r)) throw promiseReturned(node, 'mapAsync');
            next.push(k, r);
          },
        };
        break;
      }
      case 'filter': {
        const fn = s.fn;
        op = {
          push(k, v) {
            rc.key = k;
            const keep = fn(v, rc);
            if (keep === true) next.push(k, v);
            else if (typeof keep === 'object' && isThenable(keep)) throw promiseReturned(node, 'filterAsync');
            else if (keep) next.push(k, v);
          },
        };
        break;
      }
      case 'flatMap': {
        const fn = s.fn;
        op = {
          push(k, v) {
            rc.key = k;
            const out = fn(v, rc);
            if (isThenable(out)) throw promiseReturned(node, 'flatMapAsync');
            for (const r of out) next.push(k, r);
          },
        };
        break;
      }
      case 'async':
        if (!asyncOp) throw new Error(`operator ${node.name} is async but the task compiles no async stages`);
        op = asyncOp(node, next);
        break;
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
        if (s.async) {
          if (!asyncOp)
            throw new Error(`operator ${node.name} is async but the task compiles no async stages`);
          op = asyncOp(node, next);
          break;
        }
        op = processOp(
          node,
          next,
          fanOut(node.children.filter((c) => c.spec.kind === 'late').map((c) => edge(node, c))),
        );
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
        const format = memoFormat(ks.fingerprint);
        op = {
          push(k, v) {
            emitter.emit(
              topic,
              k === null || k === undefined ? null : keyBytesOf(rc, k, format, ks),
              vs.serialize(v),
              rc.timestamp,
              rc.headers,
            );
          },
        };
        break;
      }
    }
    const inputs = s.kind === 'process' && s.sides ? sideInputs(op, node.parents.length) : [op];
    const instrumented = instrument(node, inputs, counts, costs);
    compiled.set(node.id, instrumented);
    return instrumented;
  };
  const out = new Map<string, Op>();
  for (const [topic, node] of sources) out.set(topic, compile(node)[0]!);
  return out;
}
