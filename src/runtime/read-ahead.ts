import type { InRecord } from '../kafka/types.js';
import type { SubTopology } from '../topology/build.js';
import type { GraphNode, NodeKind } from '../topology/nodes.js';
import type { TaskState } from './task-state.js';

/** Operators that pass a record on under the key it came with. */
const KEEPS_KEY: ReadonlySet<NodeKind> = new Set(['map', 'filter', 'flatMap', 'peek', 'merge', 'shed']);

const byTopic = new WeakMap<SubTopology, Map<string, readonly string[]>>();

/**
 * The value stores of a sub-topology that a record of `topic` reads under its key as it came
 * from Kafka: those of the `process` operators (one input, not async) that the source reaches
 * through operators keeping the key, with the source's key format. Their state key is the
 * record key re-serialized, which for these formats is the bytes read (where it is not, reading
 * ahead only reads a key nobody asks for).
 */
export function keyedStoresOf(sub: SubTopology, topic: string): readonly string[] {
  let m = byTopic.get(sub);
  if (m === undefined) byTopic.set(sub, (m = new Map()));
  let stores = m.get(topic);
  if (stores !== undefined) return stores;
  const found = new Set<string>();
  const source = sub.sources.get(topic);
  const format = source?.spec.kind === 'source' ? source.spec.key.fingerprint : undefined;
  const seen = new Set<GraphNode>();
  const visit = (n: GraphNode) => {
    for (const c of n.children) {
      if (seen.has(c)) continue;
      seen.add(c);
      const s = c.spec;
      if (KEEPS_KEY.has(s.kind)) visit(c);
      else if (s.kind === 'process' && !s.sides && !s.async && c.keySerde.fingerprint === format)
        for (const st of s.stores)
          if (st.descriptor.kind === 'value' && st.stateName !== '__timers') found.add(st.name);
    }
  };
  if (source && format !== undefined) visit(source);
  m.set(topic, (stores = [...found]));
  return stores;
}

/**
 * Issue 14: a keyed operator whose keys miss the cache read RocksDB once per record, on the
 * processing thread. Before a fetched batch is processed, the keys of its first `first` records
 * are read in one MultiGet (they are needed at once) and those of the rest in another on the
 * libuv pool, which overlaps the processing of the first slices.
 */
export function readAheadBatch(
  task: { readonly state: string; readonly stateStore: TaskState | undefined; readonly sub: SubTopology },
  topic: string,
  records: readonly InRecord[],
  first: number,
): void {
  const state = task.stateStore;
  if (task.state !== 'running' || state?.readAhead === undefined) return;
  const stores = keyedStoresOf(task.sub, topic);
  if (stores.length === 0) return;
  const keys: Buffer[] = [];
  const n = Math.min(first, records.length);
  for (let i = 0; i < records.length; i++) {
    if (i === n) {
      if (keys.length > 0) state.readAhead(stores, keys, false);
      keys.length = 0;
    }
    const k = records[i]!.key;
    if (k !== null) keys.push(k);
  }
  if (keys.length > 0) state.readAhead(stores, keys, n < records.length);
}
