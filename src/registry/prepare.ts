import type { Serde } from '../api/serdes.js';
import type { SluiceConfig } from '../config/schema.js';
import { SluiceError, TopologyError } from '../errors.js';
import type { InRecord } from '../kafka/types.js';
import type { Topology } from '../topology/build.js';
import { RegistryClient } from './client.js';
import { isRegistrySerde, REGISTRY, type RegistryBinding, type RegistrySerde } from './serdes.js';

/**
 * The worker's side of the Schema Registry serdes. At start, {@link prepareSchemas} attaches every
 * registry serde of the topology to the configured registry, checks it answers, and resolves (or
 * registers) the schema id of each one that writes, so `serialize` never waits. Before a batch is
 * processed, {@link SchemaPrefetch.before} fetches the schemas of ids not seen yet, so
 * `deserialize` stays synchronous; a batch whose ids are all known goes straight on, without a
 * Promise. A fetch that fails is kept as the reason the records with that id are dead-lettered
 * (tried again after a few seconds), never as a stalled partition.
 */
export interface SchemaPrefetch {
  /** Calls `then` once the schemas of `records` are loaded: at once when they are all known. */
  before(topic: string, records: readonly InRecord[], then: () => Promise<void>): Promise<void>;
  /**
   * With `inputWriters`: for each input topic read by a registry serde that has a schema, a bound
   * copy of it that writes under the topic's subject (the TestDriver's `input(topic).pipe`).
   */
  readonly inputWriters: ReadonlyMap<string, { key?: Serde<unknown>; value?: Serde<unknown> }>;
}

const NONE: SchemaPrefetch = { before: (_t, _r, then) => then(), inputWriters: new Map() };

interface Reader {
  binding: RegistryBinding;
  isKey: boolean;
}

/** Throws a SchemaRegistryError when the registry is unreachable or refuses a writer's schema. */
export async function prepareSchemas(
  topology: Topology,
  config: Pick<SluiceConfig, 'schemaRegistry'>,
  opts: { inputWriters?: boolean } = {},
): Promise<SchemaPrefetch> {
  const readers = new Map<string, Reader[]>();
  const sources: Array<{ serde: Serde<unknown>; topic: string; isKey: boolean }> = [];
  const writers: Array<{ binding: RegistryBinding; topic: string; isKey: boolean }> = [];
  const all = new Set<RegistryBinding>();
  const add = (
    serde: Serde<unknown> | undefined,
    topic: string | undefined,
    isKey: boolean,
    write: boolean,
  ) => {
    if (!isRegistrySerde(serde)) return;
    const binding = serde[REGISTRY];
    all.add(binding);
    if (topic === undefined) return;
    if (write) {
      if (!writers.some((w) => w.binding === binding && w.topic === topic && w.isKey === isKey))
        writers.push({ binding, topic, isKey });
      return;
    }
    if (binding.canWrite) sources.push({ serde: serde as Serde<unknown>, topic, isKey });
    const list = readers.get(topic) ?? [];
    if (!list.some((r) => r.binding === binding && r.isKey === isKey)) list.push({ binding, isKey });
    readers.set(topic, list);
  };
  for (const sub of topology.subtopologies) {
    for (const [topic, node] of sub.sources) {
      if (node.spec.kind !== 'source') continue;
      add(node.spec.key, topic, true, false);
      add(node.spec.value, topic, false, false);
    }
    for (const node of sub.nodes) {
      const s = node.spec;
      if (s.kind === 'sink' || (s.kind === 'late' && s.topic !== undefined)) {
        add(s.key, s.topic, true, true);
        add(s.value, s.topic, false, true);
      }
    }
  }
  for (const store of topology.stores)
    if (isRegistrySerde(store.descriptor.serde))
      throw new TopologyError(
        `store ${store.name} has a Schema Registry serde (${store.descriptor.serde.name}()): registry serdes ` +
          'are for topics; give the store json() or another plain serde',
      );
  if (all.size === 0) return NONE;
  const sr = config.schemaRegistry;
  if (sr.url === undefined)
    throw new SluiceError(
      'SLUICE_CONFIG_INVALID',
      'the job uses Schema Registry serdes (avro(), protobuf(), jsonSchema()) but schemaRegistry.url is not set',
    );
  const client = new RegistryClient({ url: sr.url, auth: sr.auth, timeoutMs: sr.timeoutMs });
  for (const b of all) b.attach(client, sr.autoRegister);
  // Unreachable or refusing the credentials: a clear error now rather than every record dead-lettered.
  await client.subjects();
  for (const w of writers) await w.binding.bindWriter(w.topic, w.isKey);
  const inputWriters = new Map<string, { key?: Serde<unknown>; value?: Serde<unknown> }>();
  if (opts.inputWriters)
    for (const src of sources) {
      const fork = (src.serde as RegistrySerde<unknown>)[REGISTRY].fork();
      fork[REGISTRY].attach(client, sr.autoRegister);
      await fork[REGISTRY].bindWriter(src.topic, src.isKey);
      const entry = inputWriters.get(src.topic) ?? {};
      entry[src.isKey ? 'key' : 'value'] = fork;
      inputWriters.set(src.topic, entry);
    }
  if (readers.size === 0) return { ...NONE, inputWriters };
  return {
    inputWriters,
    before(topic, records, then) {
      const list = readers.get(topic);
      if (list === undefined) return then();
      const now = Date.now();
      let loads: Array<Promise<void>> | undefined;
      let asked: Set<string> | undefined;
      for (const r of records) {
        for (const { binding, isKey } of list) {
          const id = binding.missing(isKey ? r.key : r.value, now);
          if (id === undefined) continue;
          asked ??= new Set();
          const k = `${binding.format}:${id}:${isKey}`;
          if (asked.has(k)) continue;
          asked.add(k);
          (loads ??= []).push(binding.load(id));
        }
      }
      if (loads === undefined) return then();
      return Promise.all(loads).then(() => then());
    },
  };
}
