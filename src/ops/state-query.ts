import type { Serde } from '../api/serdes.js';
import { partitionForKey } from '../kafka/partitioner.js';
import { taskIdOf } from '../kafka/task-assigner.js';
import type { Task } from '../runtime/task.js';
import type { Topology } from '../topology/build.js';

/** A store that can be queried over HTTP: a keyed state of a `process` node (timers excluded). */
export interface QueryableStore {
  name: string;
  kind: 'value' | 'map' | 'list';
  subtopology: number;
  operator: string;
  keySerde: Serde<any>;
}

export function queryableStores(t: Topology): Map<string, QueryableStore> {
  const out = new Map<string, QueryableStore>();
  for (const s of t.subtopologies)
    for (const n of s.nodes) {
      if (n.spec.kind !== 'process') continue;
      for (const st of n.spec.stores) {
        if (st.stateName === '__timers') continue;
        out.set(st.name, {
          name: st.name,
          kind: st.descriptor.kind,
          subtopology: s.id,
          operator: n.name,
          keySerde: n.keySerde,
        });
      }
    }
  return out;
}

/**
 * The key's bytes as the store holds them: the URL's text turned into a key of the store's key
 * type, then serialized with the store's key serde. `string`: the text; `number`: the text as a
 * number; `json`: the text parsed as JSON, or the text itself as a JSON string when it does not
 * parse; `bytes`: the text's UTF-8 bytes; any other serde gets the text.
 */
export function keyBytesOf(serde: Serde<any>, text: string): Buffer {
  let key: unknown = text;
  if (serde.name === 'number') {
    const n = Number(text);
    if (text.trim() === '' || Number.isNaN(n))
      throw new QueryError(400, `key ${JSON.stringify(text)} is not a number`);
    key = n;
  } else if (serde.name === 'json') {
    try {
      key = JSON.parse(text);
    } catch {
      key = text;
    }
  } else if (serde.name === 'bytes') key = Buffer.from(text, 'utf8');
  const b = serde.serialize(key);
  if (b === null) throw new QueryError(400, 'the key serializes to null');
  return b;
}

/** A value as JSON: maps (map state) as objects when their keys are strings, else entry lists; bytes as base64. */
export function jsonValue(v: unknown): unknown {
  if (v instanceof Map) {
    const entries = [...v.entries()].map(([k, x]) => [jsonValue(k), jsonValue(x)] as const);
    return entries.every(([k]) => typeof k === 'string') ? Object.fromEntries(entries) : entries;
  }
  if (Buffer.isBuffer(v)) return { base64: v.toString('base64') };
  if (Array.isArray(v)) return v.map(jsonValue);
  return v;
}

export class QueryError extends Error {
  readonly status: number;
  readonly extra: Record<string, unknown>;
  constructor(status: number, message: string, extra: Record<string, unknown> = {}) {
    super(message);
    this.status = status;
    this.extra = extra;
  }
}

/** Where a key lives: its partition and task. */
export function locateKey(
  store: QueryableStore,
  keyText: string,
  partitionsOf: (sub: number) => number | undefined,
): { keyBytes: Buffer; partition: number; task: string } {
  const partitions = partitionsOf(store.subtopology);
  if (!partitions) throw new QueryError(503, 'partition count not known yet (worker starting)');
  const keyBytes = keyBytesOf(store.keySerde, keyText);
  const partition = partitionForKey(keyBytes, partitions);
  return { keyBytes, partition, task: taskIdOf(store.subtopology, partition) };
}

/**
 * Reads a key from a task this worker owns. Never during a restore (the state would be
 * incomplete): 503 with the reason. An absent key is a 404.
 */
export function readLocal(task: Task, store: QueryableStore, keyBytes: Buffer): unknown {
  if (task.state !== 'running')
    throw new QueryError(503, `task ${task.id} is ${task.state}`, {
      reason: task.state === 'restoring' ? 'restoring' : task.state,
      restore: task.restoreProgress ?? null,
    });
  const st = task.stateStore;
  if (!st?.read) throw new QueryError(503, `task ${task.id} has no open state`);
  const v = st.read(store.name, keyBytes);
  if (v === undefined || v === null) throw new QueryError(404, 'key not found');
  return jsonValue(v);
}
