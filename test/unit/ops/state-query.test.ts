import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, json, mapState, number, string, valueState } from '../../../src/index.js';
import { partitionForKey } from '../../../src/kafka/partitioner.js';
import {
  jsonValue,
  keyBytesOf,
  locateKey,
  QueryError,
  queryableStores,
  readLocal,
} from '../../../src/ops/state-query.js';
import type { Task } from '../../../src/runtime/task.js';

function app() {
  const a = new App({ id: 'q' });
  const keyed = a
    .stream('in', { value: json<{ u: string; n: number }>() })
    .keyBy((r) => r.u, { name: 'by-u' });
  keyed.count({ name: 'views' }).to('counts');
  keyed
    .process(
      {
        state: { last: valueState<number>(), seen: mapState<string, number>() },
        onRecord() {},
        onTimer() {},
      },
      { name: 'p' },
    )
    .to('out');
  return a;
}

test('queryableStores should list the keyed stores of process nodes and leave out timer stores', () => {
  const stores = queryableStores(app().topology());
  assert.deepEqual(
    [...stores.values()].map((s) => [s.name, s.kind, s.operator, s.subtopology, s.keySerde.name]),
    [
      ['views-agg', 'value', 'views', 1, 'string'],
      ['p-last', 'value', 'p', 1, 'string'],
      ['p-seen', 'map', 'p', 1, 'string'],
    ],
  );
});

test('keyBytesOf should turn URL text into the key bytes of the store key serde', () => {
  assert.deepEqual(keyBytesOf(string(), 'a b/é'), Buffer.from('a b/é'));
  assert.deepEqual(keyBytesOf(number(), '42.0'), Buffer.from('42'));
  assert.deepEqual(keyBytesOf(json(), '{"a":1}'), Buffer.from('{"a":1}'));
  assert.deepEqual(keyBytesOf(json(), 'plain'), Buffer.from('"plain"'), 'not JSON: a JSON string');
  assert.throws(
    () => keyBytesOf(number(), 'x'),
    (e) => e instanceof QueryError && e.status === 400,
  );
});

test('locateKey should pick the partition of Kafka default partitioner and the task of the store sub-topology', () => {
  const store = queryableStores(app().topology()).get('views-agg')!;
  const loc = locateKey(store, 'user-7', () => 6);
  assert.equal(loc.partition, partitionForKey(Buffer.from('user-7'), 6));
  assert.equal(loc.task, `1_${loc.partition}`);
  assert.throws(
    () => locateKey(store, 'user-7', () => undefined),
    (e) => e instanceof QueryError && e.status === 503,
  );
});

test('jsonValue should render maps, buffers and lists as JSON', () => {
  assert.deepEqual(jsonValue(new Map([['a', 1]])), { a: 1 });
  assert.deepEqual(jsonValue(new Map([[1, 'x']])), [[1, 'x']]);
  assert.deepEqual(jsonValue([Buffer.from('hi')]), [{ base64: 'aGk=' }]);
  assert.deepEqual(jsonValue({ sum: 3 }), { sum: 3 });
});

test('readLocal should refuse a restoring task with 503, answer 404 for an absent key and the value otherwise', () => {
  const store = queryableStores(app().topology()).get('views-agg')!;
  const values = new Map([['k', 5]]);
  const task = (state: string) =>
    ({
      id: '1_0',
      state,
      restoreProgress: { total: 10, remaining: 4 },
      stateStore: { read: (_s: string, key: Buffer) => values.get(key.toString()) },
    }) as unknown as Task;
  assert.throws(
    () => readLocal(task('restoring'), store, Buffer.from('k')),
    (e) =>
      e instanceof QueryError &&
      e.status === 503 &&
      e.extra.reason === 'restoring' &&
      (e.extra.restore as { remaining: number }).remaining === 4,
  );
  assert.throws(
    () => readLocal(task('running'), store, Buffer.from('absent')),
    (e) => e instanceof QueryError && e.status === 404,
  );
  assert.equal(readLocal(task('running'), store, Buffer.from('k')), 5);
});
