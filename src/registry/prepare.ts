import type { Serde } from '../api/serdes.js';
import type { SluiceConfig } from '../config/schema.js';
import { type SchemaRegistryError, SluiceError, TopologyError } from '../errors.js';
import type { InRecord } from '../kafka/types.js';
import type { Logger } from '../ops/logger.js';
import { askedWaitMs, RETRY_AFTER_MAX_MS, retrying, waitUnless } from '../runtime/retrying.js';
import type { Topology } from '../topology/build.js';
import { RegistryClient, registryUnavailable } from './client.js';
import { isRegistrySerde, REGISTRY, type RegistryBinding, type RegistrySerde } from './serdes.js';

/**
 * The worker's side of the Schema Registry serdes. At start, {@link prepareSchemas} attaches every
 * registry serde of the topology to the configured registry, checks it answers, and resolves (or
 * registers) the schema id of each one that writes, so `serialize` never waits. Before a batch is
 * processed, {@link SchemaPrefetch.before} fetches the schemas of ids not seen yet, so
 * `deserialize` stays synchronous; a batch whose ids are all known goes straight on, without a
 * Promise. A fetch that fails for the records (the registry has no such id) is kept as the reason
 * they are dead-lettered (tried again after a few seconds); a registry that is not serving is
 * waited for: the batch is fetched again, nothing is dead-lettered for an outage.
 */
export interface SchemaPrefetch {
  /**
   * Calls `then` once the schemas of `records` are loaded: at once when they are all known. When
   * the registry is not serving one of them ({@link notTheRecords}), calls `opts.waiting` with
   * why, sits out a backoff (unless `opts.backoff` is false; cut short once `opts.stopping()`) and
   * returns without calling `then`: the batch is not processed, and the consumer fetches it again
   * (nothing resolved). No record is dead-lettered for an outage. A stopping worker's batch that
   * needs a schema is not loaded at all (the worker drops it).
   */
  before(
    topic: string,
    records: readonly InRecord[],
    then: () => Promise<void>,
    opts?: BeforeOptions,
  ): Promise<void>;
  /** A failure of a schema the registry is not serving now (batches wait for it), else undefined. */
  outage(): SchemaRegistryError | undefined;
  /**
   * With `inputWriters`: for each input topic read by a registry serde that has a schema, a bound
   * copy of it that writes under the topic's subject (the TestDriver's `input(topic).pipe`).
   */
  readonly inputWriters: ReadonlyMap<string, { key?: Serde<unknown>; value?: Serde<unknown> }>;
}

const NONE: SchemaPrefetch = {
  before: (_t, _r, then) => then(),
  outage: () => undefined,
  inputWriters: new Map(),
};

export interface BeforeOptions {
  stopping?: () => boolean;
  /** The batch waits on the registry (is not processed): `e` says why. */
  waiting?: (e: SchemaRegistryError) => void;
  /** Sit out the backoff before returning (default true; a test driver is told at once). */
  backoff?: boolean;
}

/** How the worker waits out a registry that is not serving (at start, and before a batch). */
export interface RegistryWait {
  logger: Logger;
  /** True once the worker is stopping: start gives up, a batch stops waiting. */
  stopping: () => boolean;
}

/** A batch that waits on the registry tries again after this, doubling up to {@link OUTAGE_BACKOFF_MAX_MS}. */
export const OUTAGE_BACKOFF_MS = 200;
export const OUTAGE_BACKOFF_MAX_MS = 5_000;
/** A failing schema no batch asked for again for this long is forgotten (its partition moved). */
const OUTAGE_FORGET_MS = 60_000;
/** While the registry stays down, its warning is logged again this often. */
const OUTAGE_LOG_EVERY_MS = 30_000;

interface Reader {
  binding: RegistryBinding;
  isKey: boolean;
}

/**
 * Throws a SchemaRegistryError when the registry refuses the credentials or a writer's schema, or
 * is unreachable. With `wait` (the worker), a registry that is not serving ({@link
 * registryUnavailable}) is waited for instead, with a warning per try, as Kafka is at start.
 */
export async function prepareSchemas(
  topology: Topology,
  config: Pick<SluiceConfig, 'schemaRegistry'>,
  opts: { inputWriters?: boolean; wait?: RegistryWait } = {},
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
  // Refusing the credentials: a clear error now. Not serving: waited for with the worker.
  const w8 = opts.wait;
  const atStart = <T>(what: string, fn: () => Promise<T>): Promise<T> =>
    w8 === undefined
      ? fn()
      : retrying(w8.logger, what, fn, { retriable: registryUnavailable, stopping: w8.stopping });
  await atStart(`reach the schema registry ${client.url}`, () => client.subjects());
  for (const w of writers)
    await atStart(`resolve the schema of ${w.topic}'s ${w.isKey ? 'keys' : 'values'}`, () =>
      w.binding.bindWriter(w.topic, w.isKey),
    );
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
  const outage = new Outage(w8?.logger);
  return {
    inputWriters,
    outage: () => outage.error,
    before(topic, records, then, opts = {}) {
      const list = readers.get(topic);
      if (list === undefined) return then();
      const now = Date.now();
      let missing: Array<{ k: string; load: () => Promise<SchemaRegistryError | undefined> }> | undefined;
      for (const r of records) {
        for (const { binding, isKey } of list) {
          const id = binding.missing(isKey ? r.key : r.value, now);
          if (id === undefined) continue;
          const k = `${binding.format}:${id}:${isKey}`;
          if (missing?.some((m) => m.k === k)) continue;
          (missing ??= []).push({ k, load: () => binding.load(id) });
        }
      }
      if (missing === undefined) return then();
      const stopping = opts.stopping ?? (() => false);
      if (stopping()) return Promise.resolve(); // dropped by the worker anyway: no request
      // The registry asked to be left alone until then (Retry-After): the batch waits unasked.
      const held = outage.heldError(now);
      if (held !== undefined) {
        opts.waiting?.(held);
        return opts.backoff === false ? Promise.resolve() : outage.wait(held, topic, stopping);
      }
      const asked = missing.map((m) => m.k);
      return Promise.all(missing.map((m) => m.load())).then((results) => {
        let down: SchemaRegistryError | undefined;
        // Failures first: a schema served beside one that is not does not end the outage.
        for (const [i, e] of results.entries()) if (e) outage.failed(asked[i]!, (down = e));
        for (const [i, e] of results.entries()) if (!e) outage.loaded(asked[i]!);
        if (down === undefined) return then();
        opts.waiting?.(down);
        return opts.backoff === false ? undefined : outage.wait(down, topic, stopping);
      });
    },
  };
}

/**
 * The schemas the registry is not serving (by format, id and side), the backoff of the batches
 * that wait for them, and what is logged: a warning when the first fails and every
 * {@link OUTAGE_LOG_EVERY_MS} while any still fails, one line when the last is served.
 */
class Outage {
  /** Per schema: the last failure and when. One not asked for again for a minute (its partition revoked) is forgotten. */
  readonly #failing = new Map<string, { e: SchemaRegistryError; at: number }>();
  #since = 0;
  #tries = 0;
  #loggedAt = 0;
  /**
   * No schema is asked for before this time: the latest Retry-After of a failure (absolute ms,
   * kept up to {@link RETRY_AFTER_MAX_MS}). A batch's own wait stays within
   * {@link OUTAGE_BACKOFF_MAX_MS} meanwhile, so that the consumer still takes part in rebalances;
   * its partition is fetched again and waits on, unasked.
   */
  #askAfter = 0;

  constructor(readonly logger: Logger | undefined) {}

  /** A failure of a schema the registry is not serving, while any is (else undefined). */
  get error(): SchemaRegistryError | undefined {
    this.#forget(Date.now());
    for (const f of this.#failing.values()) return f.e;
    return undefined;
  }

  failed(key: string, e: SchemaRegistryError): void {
    const now = Date.now();
    this.#forget(now);
    if (this.#failing.size === 0) this.#since = now;
    this.#failing.set(key, { e, at: now });
    const asked = askedWaitMs(e);
    if (asked !== undefined) this.#askAfter = Math.max(this.#askAfter, now + asked);
  }

  /** While a Retry-After holds (and the outage lasts): why the batch waits without asking. */
  heldError(now: number): SchemaRegistryError | undefined {
    return now < this.#askAfter ? this.error : undefined;
  }

  loaded(key: string): void {
    if (!this.#failing.delete(key) || this.#failing.size > 0) return;
    this.logger?.info({ downForMs: Date.now() - this.#since }, 'the schema registry serves again');
    this.#reset();
  }

  #forget(now: number): void {
    if (this.#failing.size === 0) return;
    for (const [k, f] of this.#failing) if (now - f.at > OUTAGE_FORGET_MS) this.#failing.delete(k);
    if (this.#failing.size === 0) this.#reset();
  }

  #reset(): void {
    this.#tries = 0;
    this.#loggedAt = 0;
    this.#askAfter = 0;
  }

  async wait(e: SchemaRegistryError, topic: string, stopping: () => boolean): Promise<void> {
    const now = Date.now();
    this.#tries++;
    if (now - this.#loggedAt >= OUTAGE_LOG_EVERY_MS) {
      this.#loggedAt = now;
      this.logger?.warn(
        { err: e, topic, downForMs: now - this.#since },
        'the schema registry is not serving a schema these records need: their partitions wait for it (no record is dead-lettered for an outage)',
      );
    }
    const backoff = Math.min(OUTAGE_BACKOFF_MAX_MS, OUTAGE_BACKOFF_MS * 2 ** Math.min(this.#tries - 1, 10));
    // Until the registry's Retry-After, but never past the longest backoff: the consumer must get
    // back to its group (a rebalance waits for every batch handler); the next try is held unasked.
    const delay = Math.min(OUTAGE_BACKOFF_MAX_MS, Math.max(backoff, this.#askAfter - now));
    await waitUnless(delay, stopping);
  }
}
