import type { AsyncContext } from '../api/async.js';
import { isBuiltInJson } from '../api/serdes.js';
import { copyJsonValue, copyValue } from '../api/state.js';
import { SluiceError } from '../errors.js';
import { type GraphNode, INFLIGHT_STATE } from '../topology/nodes.js';
import { type AsyncBehaviour, AsyncStage, type AsyncStageEnv, type InFlight } from './async-stage.js';
import type { Op } from './operators.js';
import type { MutableRecordContext } from './record-context.js';
import { approxSize, type KeyedState } from './task-state.js';

/** What {@link createAsyncStage} needs besides the node: the stage's environment, minus what the node gives. */
export type AsyncStageDeps = Omit<AsyncStageEnv, 'node' | 'settings' | 'store' | 'st'>;

/** Compiles an async node (`mapAsync`, `filterAsync`, `flatMapAsync`, an async `process`) into a stage. */
export function createAsyncStage(
  node: GraphNode,
  downstream: Op,
  rc: MutableRecordContext,
  st: KeyedState,
  deps: AsyncStageDeps,
): AsyncStage {
  const s = node.spec;
  if (s.kind !== 'async' && !(s.kind === 'process' && s.async))
    throw new Error(`operator ${node.name} is not async`);
  const settings = s.kind === 'async' ? s.settings : s.async!;
  const store = s.stores.find((x) => x.stateName === INFLIGHT_STATE)!.name;
  const behaviour =
    s.kind === 'async' ? functionBehaviour(node, downstream) : processBehaviour(node, downstream, rc, st);
  return new AsyncStage({ ...deps, node, settings, st, store }, behaviour, rc);
}

function functionBehaviour(node: GraphNode, down: Op): AsyncBehaviour {
  if (node.spec.kind !== 'async') throw new Error('not an async function node');
  const { fn, op, settings } = node.spec;
  const call = (r: InFlight, ctx: AsyncContext<unknown>) => fn(r.value, ctx);
  const serialPerKey = settings.ordered === 'key';
  switch (op) {
    case 'map':
      return { call, serialPerKey, apply: (r, v) => down.push(r.key, v) };
    case 'filter':
      return {
        call,
        serialPerKey,
        apply: (r, keep) => {
          if (keep) down.push(r.key, r.value);
        },
      };
    case 'flatMap':
      return {
        call,
        serialPerKey,
        apply: (r, values) => {
          for (const v of values as Iterable<unknown>) down.push(r.key, v);
        },
      };
  }
}

/** An attempt's effects, applied together when the record leaves the stage. */
interface ProcessEffects {
  /** Store → the key's new value (`undefined`: cleared). */
  writes: Map<string, unknown>;
  emits: Array<[value: unknown, timestamp: number | undefined]>;
  keyBytes: Buffer;
}

/**
 * An async `process`: each attempt gets its own context, whose value-state handles read the key's
 * state (its own writes first) and buffer their writes, and whose `emit` buffers too. The
 * record's key runs one record at a time, so the state read is the key's state after the record
 * before it; the writes and emits go in when the record leaves, at once (never half-applied in a
 * checkpoint), and those of an attempt that timed out or threw are dropped.
 */
function processBehaviour(
  node: GraphNode,
  down: Op,
  rc: MutableRecordContext,
  st: KeyedState,
): AsyncBehaviour {
  if (node.spec.kind !== 'process') throw new Error('not a process node');
  const { processor, stores } = node.spec;
  const keySerde = node.keySerde;
  const values = stores.filter((x) => x.stateName !== INFLIGHT_STATE);
  const noTimers = () => {
    throw new SluiceError(
      'SLUICE_TOPOLOGY_INVALID',
      `operator ${node.name}: an async onRecord has no timers; put them in a process after it`,
    );
  };
  const timers = {
    atEventTime: noTimers,
    atProcessingTime: noTimers,
    cancelEventTime: noTimers,
    cancelProcessingTime: noTimers,
  };
  return {
    serialPerKey: true,
    call(r, actx) {
      const keyBytes =
        r.key === null || r.key === undefined
          ? Buffer.alloc(0)
          : (keySerde.serialize(r.key) ?? Buffer.alloc(0));
      const fx: ProcessEffects = { writes: new Map(), emits: [], keyBytes };
      let finished = false;
      const late = (what: string) => {
        if (finished)
          throw new SluiceError(
            'SLUICE_OPERATOR',
            `operator ${node.name}: ${what} after onRecord's Promise settled (await everything inside onRecord)`,
          );
      };
      const state: Record<string, unknown> = {};
      for (const s of values) {
        const store = s.name;
        // As a handle's (keyed-process.ts): a value JSON cannot write fails where it is set.
        const copyIn =
          s.descriptor.kind === 'value' && isBuiltInJson(s.descriptor.serde) ? copyJsonValue : copyValue;
        state[s.stateName] = {
          get() {
            if (fx.writes.has(store)) return copyValue(fx.writes.get(store));
            return copyValue(st.cache.get(store, keyBytes));
          },
          set(v: unknown) {
            late('state set');
            if (v === undefined)
              throw new SluiceError('SLUICE_OPERATOR', 'valueState.set(undefined): use clear()');
            fx.writes.set(store, copyIn(v));
          },
          clear() {
            late('state clear');
            fx.writes.set(store, undefined);
          },
        };
      }
      const ctx = {
        ...actx,
        watermark: rc.watermark,
        state,
        timers,
        emit(value: unknown, opts?: { timestamp?: number }) {
          late('emit');
          fx.emits.push([value, opts?.timestamp]);
        },
      };
      const done = () => {
        finished = true;
        return fx;
      };
      return Promise.resolve(processor.onRecord(r.value, ctx as any)).then(done, (e) => {
        finished = true;
        throw e;
      });
    },
    apply(r, result) {
      const fx = result as ProcessEffects;
      for (const [store, v] of fx.writes) {
        if (v === undefined) st.cache.delete(store, fx.keyBytes);
        else st.cache.set(store, fx.keyBytes, v, approxSize(fx.keyBytes, v));
        st.noteWrite();
      }
      for (const [value, ts] of fx.emits) {
        rc.timestamp = ts ?? r.rc.timestamp;
        down.push(r.key, value);
      }
    },
  };
}
