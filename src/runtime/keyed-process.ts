import { isThenable } from '../api/async.js';
import { isBuiltInJson } from '../api/serdes.js';
import { copyJsonValue, copyValue, LIVE_STATE, type ValueState } from '../api/state.js';
import { isSluiceFault, OperatorError, SluiceError } from '../errors.js';
import type { GraphNode } from '../topology/nodes.js';
import { type Copy, type KeyScope, listHandle, live, mapHandle } from './collection-state.js';
import type { Op } from './operators.js';
import { keyBytesOf, type MutableRecordContext, memoFormat, memoKeyBytes } from './record-context.js';
import { approxSize, type KeyedState } from './task-state.js';
import { TimerService } from './timers.js';

const EMPTY = Buffer.alloc(0);

function valueHandle(store: string, scope: KeyScope, st: KeyedState, copy: Copy): ValueState<unknown> {
  const cache = st.cache;
  // The cache's key string, once per record key (`setKey` may know it without a conversion).
  const id = () => (scope.id ??= scope.bytes.toString('latin1'));
  return {
    get: () => copy(cache.get(store, scope.bytes, id())),
    set(v) {
      if (v === undefined) throw new SluiceError('SLUICE_OPERATOR', 'valueState.set(undefined): use clear()');
      cache.set(store, scope.bytes, copy(v), approxSize(scope.bytes, v), id());
      st.noteWrite();
    },
    clear() {
      cache.delete(store, scope.bytes, undefined, id());
      st.noteWrite();
    },
  };
}

/**
 * Compiles a `process` node against a task's state: handles scoped to the current key, timers,
 * and `emit` pushing downstream with the current key.
 */
export function createProcessOp(
  node: GraphNode,
  downstream: Op,
  rc: MutableRecordContext,
  st: KeyedState,
  late?: Op,
): Op {
  if (node.spec.kind !== 'process') throw new Error('not a process node');
  const { processor, stores, sides } = node.spec;
  const keySerde = node.keySerde;
  const scope: KeyScope = { bytes: Buffer.alloc(0) };
  const handles: Record<string, unknown> = {};
  // User processors get copies of state values; Sluice's own (windows, joins) the stored ones.
  const copy: Copy = (processor as { [LIVE_STATE]?: boolean })[LIVE_STATE] ? live : copyValue;
  let timerStore: string | undefined;
  for (const s of stores) {
    if (s.stateName === '__timers') {
      timerStore = s.name;
      continue;
    }
    const d = s.descriptor;
    // A value JSON cannot write fails where it is set (its record is dead-lettered), not at the checkpoint.
    const c = copy === copyValue && isBuiltInJson(d.serde) ? copyJsonValue : copy;
    handles[s.stateName] =
      d.kind === 'value'
        ? valueHandle(s.name, scope, st, c)
        : d.kind === 'map'
          ? mapHandle(s.name, scope, st, c, d.keySerde, d.serde)
          : listHandle(s.name, scope, st, c, d.serde);
  }
  let currentKey: unknown = null;
  let emitTs: number | undefined;
  const timers = timerStore ? new TimerService(timerStore, st, scope) : undefined;
  const noTimers = () => {
    throw new SluiceError('SLUICE_TOPOLOGY_INVALID', `operator ${node.name} uses timers but has no onTimer`);
  };
  const ctx = {
    get key() {
      return currentKey;
    },
    get topic() {
      return rc.topic;
    },
    get partition() {
      return rc.partition;
    },
    get offset() {
      return rc.offset;
    },
    get timestamp() {
      return emitTs ?? rc.timestamp;
    },
    get headers() {
      return rc.headers;
    },
    get watermark() {
      return rc.watermark;
    },
    domain: 'event' as 'event' | 'processing',
    signal: NEVER_ABORTED,
    state: handles,
    timers: timers?.api ?? {
      atEventTime: noTimers,
      atProcessingTime: noTimers,
      cancelEventTime: noTimers,
      cancelProcessingTime: noTimers,
    },
    emit(value: unknown, opts?: { timestamp?: number }) {
      const saved = rc.timestamp;
      if (opts?.timestamp !== undefined) rc.timestamp = opts.timestamp;
      else if (emitTs !== undefined) rc.timestamp = emitTs;
      rc.key = currentKey;
      downstream.push(currentKey, value);
      rc.timestamp = saved;
    },
    /** Internal (windows): the current record is late; to the `late` children, or dropped. */
    late(value: unknown) {
      rc.key = currentKey;
      late?.push(currentKey, value);
    },
  };
  const utf8Keys = keySerde.fingerprint === 'string';
  const format = memoFormat(keySerde.fingerprint);
  const setKey = (k: unknown) => {
    currentKey = k;
    if (k === null || k === undefined) {
      scope.bytes = EMPTY;
      scope.id = '';
      return;
    }
    const bytes = keyBytesOf(rc, k, format, keySerde) ?? EMPTY;
    scope.bytes = bytes;
    // UTF-8 of a string as long as the string: all ASCII, so its latin1 form is the string.
    scope.id = utf8Keys && typeof k === 'string' && bytes.length === k.length ? k : undefined;
    // `emit` pushes this key on: a sink of the same format writes these bytes.
    memoKeyBytes(rc, k, format, bytes);
  };
  if (timers && processor.onTimer) {
    const onTimer = processor.onTimer;
    timers.onFire = (ts, keyBytes, domain) => {
      currentKey = keyBytes.length === 0 ? null : keySerde.deserialize(keyBytes);
      scope.bytes = keyBytes;
      scope.id = undefined;
      emitTs = ts;
      ctx.domain = domain;
      try {
        onTimer(ts, ctx as any);
      } catch (e) {
        // Named like a record's error (what a downstream operator threw is named already; a
        // fault of Sluice or the machine is nobody's), for the task's error policy.
        throw e instanceof OperatorError || isSluiceFault(e)
          ? e
          : new OperatorError(node.name, e, node.onError);
      } finally {
        emitTs = undefined;
        ctx.domain = 'event';
      }
    };
    st.registerTimers(timers);
  }
  if (sides) {
    const { onLeft, onRight } = sides;
    return {
      push() {
        throw new Error(`operator ${node.name} has two inputs`);
      },
      side(i, k, v) {
        setKey(k);
        if (i === 0) onLeft(v, ctx);
        else onRight(v, ctx);
      },
    };
  }
  return {
    push(k, v) {
      setKey(k);
      const r = processor.onRecord(v, ctx as any);
      if (r !== undefined && isThenable(r))
        throw new OperatorError(
          node.name,
          new TypeError(
            `onRecord of operator ${node.name} returned a Promise but is not declared async: write it \`async onRecord(...)\`, or pass { async: true } to process (see mapAsync)`,
          ),
          'fail',
        );
    },
  };
}

/** The signal of a synchronous onRecord: never aborted. */
export const NEVER_ABORTED: AbortSignal = new AbortController().signal;
