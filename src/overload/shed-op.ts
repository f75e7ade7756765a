import { json, type Serde } from '../api/serdes.js';
import type { Headers } from '../kafka/types.js';
import { emitsWithin } from '../runtime/collector.js';
import type { Emitter, Op } from '../runtime/operators.js';
import type { MutableRecordContext } from '../runtime/record-context.js';
import type { GraphNode } from '../topology/nodes.js';
import { OVERFLOW_HEADERS, type TaskShedder } from './shedder.js';

/**
 * The operator of a `.shed()` point. With `overload.placement: operator` it drops (or, in divert
 * mode, writes to `<appId>-overflow` through the task's collector, so inside the checkpoint's
 * transaction) the fraction p of the records that reach it; otherwise it passes everything on.
 */
export function createShedOp(
  node: GraphNode,
  next: Op,
  deps: { shedder: TaskShedder; rc: MutableRecordContext; emitter: Emitter },
): Op {
  const s = node.spec;
  if (s.kind !== 'shed') throw new Error(`not a shed node: ${node.name}`);
  const { shedder, rc, emitter } = deps;
  if (shedder.atSource || shedder.mode === 'backpressure') return next;
  const priority = s.priority;
  const ks: Serde<unknown> = node.keySerde;
  const vs: Serde<unknown> = s.value ?? json();
  const topic = shedder.overflowTopic;
  const byPriority = shedder.byPriority && priority !== undefined;
  return {
    push(k, v) {
      if (shedder.p <= 0 && !byPriority) return next.push(k, v);
      const drop = byPriority ? shedder.dropByPriority(priority(v, rc)) : shedder.dropRandom();
      if (!drop) return next.push(k, v);
      if (shedder.divert) {
        const headers: Headers = { ...((rc.headers as Headers | undefined) ?? {}) };
        headers[OVERFLOW_HEADERS.topic] = rc.topic;
        headers[OVERFLOW_HEADERS.partition] = String(rc.partition);
        headers[OVERFLOW_HEADERS.offset] = rc.offset;
        headers[OVERFLOW_HEADERS.shedFraction] = shedder.p.toFixed(3);
        headers[OVERFLOW_HEADERS.timestamp] = String(rc.timestamp);
        const key = k === null || k === undefined ? null : ks.serialize(k);
        if (!emitsWithin(emitter, topic, key, vs.serialize(v), rc.timestamp, headers)) {
          // Too large for the overflow topic: processed instead of lost (and not counted as shed).
          shedder.shed--;
          return next.push(k, v);
        }
      }
    },
  };
}
