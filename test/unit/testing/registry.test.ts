import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, avro, jsonSchema, protobuf } from '../../../src/index.js';
import { frame } from '../../../src/registry/wire.js';
import { TestDriver } from '../../../src/testing/index.js';

/**
 * Schema Registry serdes under the test driver, with the in-memory registry `mock://<scope>`
 * (no registry server): the driver resolves writer ids at its start and fetches unknown ids before
 * each delivery, as a worker does, so bad bytes and unknown ids reach the dead-letter topic.
 */
const USER = {
  type: 'record',
  name: 'User',
  fields: [
    { name: 'id', type: 'int' },
    { name: 'name', type: 'string' },
  ],
};

test('an Avro job should run under the driver with mock://, poison bytes and unknown ids to the DLQ', async () => {
  const app = new App({ id: 'drv-avro' });
  app
    .stream('users', {
      key: avro<string>({ schema: '"string"' }),
      value: avro<{ id: number; name: string }>({ schema: USER }),
    })
    .map((u) => ({ id: u.id, name: u.name.toUpperCase() }))
    .to('upper', { key: avro<string>({ schema: '"string"' }), value: avro({ schema: USER }) });
  const driver = new TestDriver(app, { config: { schemaRegistry: { url: 'mock://drv-avro' } } });
  try {
    const users = driver.input('users');
    await users.pipe('k1', { id: 1, name: 'ann' });
    await users.pipeRaw(null, Buffer.from('{"id":2}'));
    await users.pipeRaw(null, frame(4242, Buffer.from([2])));
    await users.pipe('k3', { id: 3, name: 'cy' });
    const out = driver.output('upper').readAll();
    assert.deepEqual(
      out.map((r) => [r.key, { ...(r.value as object) }]),
      [
        ['k1', { id: 1, name: 'ANN' }],
        ['k3', { id: 3, name: 'CY' }],
      ],
    );
    const dead = driver.deadLetters().map((d) => d.error.message);
    assert.equal(dead.length, 2);
    assert.match(dead[0]!, /not in the Schema Registry wire format: first byte 0x7b/);
    assert.match(dead[1]!, /cannot read schema id 4242: schema registry mock:\/\/drv-avro answered 404/);
  } finally {
    await driver.close();
  }
});

test('Protobuf and JSON Schema jobs should run under the driver too', async () => {
  const app = new App({ id: 'drv-pb' });
  const proto = 'syntax = "proto3"; package p; message Click { string page = 1; int64 at = 2; }';
  app
    .stream('clicks', { value: protobuf<{ page: string; at: string }>({ schema: proto }) })
    .map((c) => ({ page: c.page, at: Number(c.at) }))
    .to('clicks-json', {
      value: jsonSchema<{ page: string; at: number }>({
        schema: { type: 'object', properties: { page: { type: 'string' }, at: { type: 'integer' } } },
      }),
    });
  const driver = new TestDriver(app, { config: { schemaRegistry: { url: 'mock://drv-pb' } } });
  try {
    await driver.input('clicks').pipe('u', { page: '/a', at: '1700000000000' });
    assert.deepEqual(driver.output('clicks-json').readValues(), [{ page: '/a', at: 1_700_000_000_000 }]);
  } finally {
    await driver.close();
  }
});

test('registry serdes under the driver without schemaRegistry.url should fail at start, saying so', async () => {
  const app = new App({ id: 'drv-nourl' });
  app.stream('users', { value: avro({ schema: USER }) }).to('out', { value: avro({ schema: USER }) });
  const driver = new TestDriver(app);
  try {
    await assert.rejects(
      driver.input('users').pipe('k', { id: 1, name: 'a' }),
      /schemaRegistry\.url is not set/,
    );
  } finally {
    await driver.close().catch(() => undefined);
  }
});
