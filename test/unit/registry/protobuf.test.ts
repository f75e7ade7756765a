import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, protobuf } from '../../../src/index.js';
import type { InRecord } from '../../../src/kafka/types.js';
import { prepareSchemas } from '../../../src/registry/prepare.js';

/** Protobuf schemas with Google's well-known types, through the in-memory registry (mock://). */
const PROTO = `syntax = "proto3";
package ev;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
message Event {
  string id = 1;
  google.protobuf.Timestamp at = 2;
  google.protobuf.Duration took = 3;
  repeated int64 counts = 4;
  map<string, int64> totals = 5;
}
`;

test('a Protobuf schema importing well-known types should write and read, 64-bit ints as strings at any depth', async () => {
  const writer = protobuf<Record<string, unknown>>({ schema: PROTO });
  const reader = protobuf<Record<string, unknown>>();
  const app = new App({ id: 'pb-wkt' });
  app.stream('ev-in', { value: reader }).to('ev-out', { value: writer });
  const schemas = await prepareSchemas(app.topology(), {
    schemaRegistry: { url: 'mock://pb-wkt', auth: {}, autoRegister: true, timeoutMs: 1000 },
  });
  const value = {
    id: 'e1',
    at: { seconds: '1700000000', nanos: 5 },
    took: { seconds: '2', nanos: 0 },
    counts: ['9007199254740993', '1'],
    totals: { a: '12345678901234' },
  };
  const bytes = writer.serialize(value)!;
  await schemas.before('ev-in', [{ key: null, value: bytes } as unknown as InRecord], async () => {});
  assert.deepEqual(reader.deserialize(bytes), value);
  assert.throws(() => writer.serialize({ ...value, counts: ['many'] }), /counts: integer\|Long\[\] expected/);
});

test('a Protobuf schema importing anything but well-known types should be refused with the import named', () => {
  assert.throws(
    () => protobuf({ schema: 'syntax = "proto3"; import "shop/common.proto"; message A { string s = 1; }' }),
    /imports shop\/common\.proto: only Google's well-known types/,
  );
});
