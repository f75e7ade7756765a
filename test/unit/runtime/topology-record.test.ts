import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SluiceConfig } from '../../../src/config/schema.js';
import { SluiceError } from '../../../src/errors.js';
import { App, json } from '../../../src/index.js';
import type { KafkaAdmin } from '../../../src/kafka/admin.js';
import type { KafkaClient } from '../../../src/kafka/client.js';
import type { InRecord, OutRecord } from '../../../src/kafka/types.js';
import type { Logger } from '../../../src/ops/logger.js';
import { prepareAndRecord } from '../../../src/runtime/topology-record.js';

/** A cluster of topics (name → partitions) and the records of the 1-partition ones, behind fakes of the admin and client. */
function fakeKafka(topics: Record<string, number>) {
  const cluster = new Map(Object.entries(topics));
  const log = new Map<string, InRecord[]>();
  const admin = {
    listTopics: async () => [...cluster.keys()],
    brokerCount: async () => 1,
    partitionCounts: async (names: readonly string[]) =>
      new Map(names.filter((n) => cluster.has(n)).map((n) => [n, cluster.get(n)!])),
    ensureTopics: async (specs: ReadonlyArray<{ topic: string; partitions: number }>) => {
      for (const s of specs) if (!cluster.has(s.topic)) cluster.set(s.topic, s.partitions);
      return [];
    },
    maxMessageBytes: async (names: readonly string[]) =>
      new Map(names.filter((n) => cluster.has(n)).map((n) => [n, 1_048_588])),
  } as unknown as KafkaAdmin;
  const client = {
    recordLimits: new Map<string, number>(),
    partitionReader: () => ({
      endOffsets: async (t: string) => ({ low: 0n, high: BigInt(log.get(t)?.length ?? 0) }),
      read: async (o: { topic: string; from: bigint; to: bigint; onRecords(r: InRecord[]): void }) => {
        o.onRecords((log.get(o.topic) ?? []).slice(Number(o.from), Number(o.to)));
        return 0;
      },
      close: async () => undefined,
    }),
    plainProducer: async () => ({
      send: async (records: ReadonlyMap<string, OutRecord[]>) => {
        for (const [t, rs] of records) {
          const l = log.get(t) ?? [];
          for (const r of rs)
            l.push({ key: r.key, value: r.value, offset: String(l.length), timestamp: '0' });
          log.set(t, l);
        }
        return new Map();
      },
      close: async () => undefined,
    }),
  } as unknown as KafkaClient;
  return { admin, client, log };
}

function counts(store: string) {
  const app = new App({ id: 'shop' });
  app
    .stream('orders', { value: json<{ user: string }>() })
    .keyBy((o) => o.user, { name: 'by-user' })
    .count({ name: store })
    .to('counts');
  return app.topology();
}

const config = (allowStateChange: boolean) =>
  ({ kafka: {}, processing: { allowStateChange }, overload: { mode: 'off' } }) as unknown as SluiceConfig;

function logger() {
  const warned: string[] = [];
  const l = { info: () => undefined, warn: (o: { change?: string }) => warned.push(o.change ?? '') };
  return { l: l as unknown as Logger, warned };
}

test('prepareAndRecord should record the topology once, refuse a renamed store, and record it when allowed', async () => {
  const k = fakeKafka({ orders: 4, counts: 4 });
  const { l, warned } = logger();
  await prepareAndRecord(k.admin, k.client, counts('per-user'), config(false), l);
  assert.equal(k.log.get('shop-topology')?.length, 1, 'recorded, in the topic prepareTopics created');
  const limits = (k.client as unknown as { recordLimits: Map<string, number> }).recordLimits;
  assert.deepEqual(
    [...limits.keys()].sort(),
    ['counts', 'shop-by-user-repartition', 'shop-dlq', 'shop-per-user-agg-changelog'],
    'sinks, dead letters and changelogs',
  );
  await prepareAndRecord(k.admin, k.client, counts('per-user'), config(false), l);
  assert.equal(k.log.get('shop-topology')?.length, 1, 'an unchanged topology is not written again');

  await assert.rejects(
    prepareAndRecord(k.admin, k.client, counts('by-user-count'), config(false), l),
    (e: unknown) =>
      e instanceof SluiceError &&
      e.code === 'SLUICE_STATE_CHANGE' &&
      /store per-user-agg is gone \(renamed to by-user-count-agg\?\)/.test(e.message),
  );
  assert.equal(k.log.get('shop-topology')?.length, 1, 'a refused change records nothing');

  await prepareAndRecord(k.admin, k.client, counts('by-user-count'), config(true), l);
  assert.equal(k.log.get('shop-topology')?.length, 2);
  assert.equal(warned.length, 1);
  assert.match(warned[0]!, /per-user-agg is gone/);
  // Recorded: the next start of the new version is clean.
  await prepareAndRecord(k.admin, k.client, counts('by-user-count'), config(false), l);
});
