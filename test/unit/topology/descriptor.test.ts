import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Serde, string } from '../../../src/api/serdes.js';
import type { KeyedStream } from '../../../src/api/stream.js';
import { App, json, listState, mapState, number, valueState } from '../../../src/index.js';
import {
  describeForRecord,
  descriptorHash,
  diffTopologies,
  partitionsOf,
  serdeFingerprint,
} from '../../../src/topology/descriptor.js';

interface Variant {
  store?: string;
  keySerde?: 'string' | 'number';
  valueSerde?: 'json' | 'number';
  repartition?: boolean;
  unnamedCount?: boolean;
}

/** orders → keyBy(user) → process(sum, state acc) → sums; optionally an unnamed count. */
function job(v: Variant = {}) {
  const app = new App({ id: 'shop' });
  const src = app.stream('orders', { key: string(), value: json<{ user: string; n: number }>() });
  const keyed =
    v.repartition === false
      ? (src.byKey() as unknown as KeyedStream<number, { user: string; n: number }>)
      : v.keySerde === 'number'
        ? src.keyBy((o) => o.n, { name: 'by-user', key: number() })
        : src.keyBy((o) => o.user, { name: 'by-user' });
  const state = { acc: v.valueSerde === 'number' ? valueState<number>(number()) : valueState<number>() };
  keyed
    .process<number, typeof state>(
      {
        state,
        onRecord(r: { n: number }, ctx) {
          ctx.state.acc.set((ctx.state.acc.get() ?? 0) + r.n);
        },
      },
      { name: v.store ?? 'sum' },
    )
    .to('sums');
  if (v.unnamedCount) keyed.count().to('counts');
  const t = app.topology();
  return { t, d: describeForRecord(t, partitionsOf(t, new Map([['orders', 4]]))) };
}

test('describeForRecord should list stores with serde fingerprints, partition counts and repartitions', () => {
  const { d } = job();
  assert.equal(d.version, 1);
  assert.deepEqual(d.repartitions, [{ topic: 'shop-by-user-repartition', writtenBy: 0, readsFrom: 1 }]);
  assert.deepEqual(d.subtopologies[0]!.sources, { orders: 4 });
  assert.deepEqual(d.subtopologies[1]!.sources, { 'shop-by-user-repartition': 4 });
  assert.deepEqual(d.subtopologies[1]!.stores, [
    { name: 'sum-acc', changelog: 'shop-sum-acc-changelog', kind: 'value', key: 'string', value: 'json' },
  ]);
  assert.deepEqual(d.subtopologies[1]!.sinks, ['sums']);
  assert.deepEqual(d.subtopologies[0]!.sinks, [], 'a repartition topic is no sink');
});

test('diffTopologies should find nothing between identical jobs, and the hash should be stable', () => {
  const a = job().d;
  const b = job().d;
  assert.equal(descriptorHash(a), descriptorHash(b));
  assert.deepEqual(diffTopologies(a, b), { breaking: [], safe: [] });
});

test('diffTopologies should report a renamed store, guessing the new name', () => {
  const r = diffTopologies(job().d, job({ store: 'total' }).d);
  assert.deepEqual(
    r.breaking.map((c) => c.kind),
    ['store-removed'],
  );
  assert.match(r.breaking[0]!.message, /store sum-acc is gone \(renamed to total-acc\?\)/);
  assert.match(r.breaking[0]!.message, /shop-sum-acc-changelog/);
  assert.deepEqual(r.safe, ['new store total-acc (value)']);
});

test('diffTopologies should report a changed key serde and a changed value serde', () => {
  const key = diffTopologies(job().d, job({ keySerde: 'number' }).d);
  assert.deepEqual(
    key.breaking.map((c) => c.kind),
    ['store-key-serde'],
  );
  assert.match(key.breaking[0]!.message, /from string to number/);
  const value = diffTopologies(job().d, job({ valueSerde: 'number' }).d);
  assert.deepEqual(
    value.breaking.map((c) => c.kind),
    ['store-value-serde'],
  );
});

test('diffTopologies should report an unnamed stateful operator when given the warnings, as new otherwise', () => {
  const v2 = job({ unnamedCount: true });
  assert.ok(v2.t.warnings.length > 0);
  const plan = diffTopologies(job().d, v2.d, v2.t.warnings);
  assert.deepEqual(
    plan.breaking.map((c) => c.kind),
    ['generated-name'],
  );
  assert.match(plan.breaking[0]!.message, /generated name/);
  // A worker passes no warnings: a new store and sink are safe.
  const worker = diffTopologies(job().d, v2.d);
  assert.deepEqual(worker.breaking, []);
  assert.ok(worker.safe.some((s) => s.startsWith('new store count-')));
  assert.ok(worker.safe.includes('new sink counts'));
});

test('diffTopologies should report a changed partition count of a source', () => {
  const { t } = job();
  const at8 = describeForRecord(t, partitionsOf(t, new Map([['orders', 8]])));
  const r = diffTopologies(job().d, at8);
  assert.deepEqual(
    r.breaking.map((c) => c.kind),
    ['partitions', 'partitions'],
  );
  assert.match(r.breaking[0]!.message, /source orders: 4 partitions recorded, 8 now/);
});

test('diffTopologies should report a removed repartition topic', () => {
  const r = diffTopologies(job().d, job({ repartition: false }).d);
  assert.ok(
    r.breaking.some((c) => c.kind === 'repartition-removed' && /shop-by-user-repartition/.test(c.message)),
  );
});

test('serdeFingerprint should name built-ins and hash custom serdes by name and code', () => {
  assert.equal(serdeFingerprint(string()), 'string');
  assert.equal(serdeFingerprint(json()), 'json');
  assert.equal(serdeFingerprint(number()), 'number');
  const custom = (shift: number): Serde<number> => ({
    name: 'shifted',
    serialize: shift === 1 ? (v) => Buffer.from([v + 1]) : (v) => Buffer.from([v + 2]),
    deserialize: (b) => b![0]!,
  });
  assert.match(serdeFingerprint(custom(1)), /^custom:shifted:[0-9a-f]{12}$/);
  assert.equal(serdeFingerprint(custom(1)), serdeFingerprint(custom(1)));
  assert.notEqual(serdeFingerprint(custom(1)), serdeFingerprint(custom(2)));
  assert.equal(serdeFingerprint({ ...custom(1), fingerprint: 'mine-v1' }), 'mine-v1');
});

test('map and list stores should be fingerprinted with their per-entry layout, so a blob-layout record is a breaking change', () => {
  const app = new App({ id: 'shop' });
  const state = { m: mapState<string, number>({ key: string() }), l: listState<number>() };
  app
    .stream('orders', { key: string(), value: json<number>() })
    .byKey()
    .process<number, typeof state>({ state, onRecord() {} }, { name: 'p' })
    .to('out');
  const t = app.topology();
  const d = describeForRecord(t, partitionsOf(t, new Map([['orders', 1]])));
  const stores = d.subtopologies[0]!.stores.map((s) => [s.name, s.value]);
  assert.deepEqual(stores, [
    ['p-m', 'entries:string:json'],
    ['p-l', 'elements:json'],
  ]);
  // What a version with one blob per record key recorded: the bare serde.
  const old = {
    ...d,
    subtopologies: d.subtopologies.map((sub) => ({
      ...sub,
      stores: sub.stores.map((s) => ({ ...s, value: 'json' })),
    })),
  };
  const diff = diffTopologies(old, d);
  assert.deepEqual(
    diff.breaking.map((c) => c.kind),
    ['store-value-serde', 'store-value-serde'],
  );
});
