import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SerdeError } from '../../../src/errors.js';
import { avro, jsonSchema, protobuf } from '../../../src/index.js';
import {
  encodeMessageIndexes,
  frame,
  peekSchemaId,
  readMessageIndexes,
  schemaIdOf,
} from '../../../src/registry/wire.js';

test('frame should write magic byte 0 and the schema id as 4 bytes big-endian before the payload', () => {
  const b = frame(0x01020304, Buffer.from('xy'));
  assert.deepEqual([...b], [0, 1, 2, 3, 4, 0x78, 0x79]);
  assert.equal(schemaIdOf(b), 0x01020304);
  assert.equal(peekSchemaId(b), 0x01020304);
  assert.equal(schemaIdOf(frame(0xffffffff, Buffer.alloc(0))), 0xffffffff);
});

test('Protobuf message indexes should follow Confluent: [0] as one 0 byte, else zig-zag count then indexes', () => {
  assert.deepEqual([...encodeMessageIndexes([0])], [0]);
  // count 2 → zig-zag 4; 1 → 2; 2 → 4
  assert.deepEqual([...encodeMessageIndexes([1, 2])], [4, 2, 4]);
  // count 1 → 2; 64 → zig-zag 128 → varint 0x80 0x01
  assert.deepEqual([...encodeMessageIndexes([64])], [2, 0x80, 0x01]);
  for (const idx of [[0], [1], [3, 0, 7], [200]]) {
    const b = frame(9, Buffer.from([0xaa]), idx);
    const { indexes, next } = readMessageIndexes(b);
    assert.deepEqual(indexes, idx);
    assert.equal(b[next], 0xaa);
  }
  // A writer that spells [0] out in full (count 1, index 0) reads the same.
  assert.deepEqual(readMessageIndexes(Buffer.from([0, 0, 0, 0, 1, 2, 0, 0xaa])).indexes, [0]);
});

test('bytes without the magic byte or shorter than the header should be a SerdeError naming why', () => {
  assert.throws(
    () => schemaIdOf(Buffer.from('{"a":1}')),
    (e: unknown) => {
      assert.ok(e instanceof SerdeError);
      assert.match((e as Error).message, /first byte 0x7b, not the magic byte 0x00/);
      return true;
    },
  );
  assert.throws(() => schemaIdOf(Buffer.from([0, 1])), /2 bytes, fewer than the 5-byte header/);
  assert.equal(peekSchemaId(Buffer.from('hello')), undefined);
  assert.equal(peekSchemaId(null), undefined);
  assert.throws(() => readMessageIndexes(Buffer.from([0, 0, 0, 0, 1, 0x80])), /truncated/);
});

test('registry serdes should reject unframed bytes and unfetched ids as SerdeErrors (the DLQ path), null as null', () => {
  for (const s of [avro(), protobuf(), jsonSchema()]) {
    assert.equal(s.deserialize(null), null);
    assert.equal(s.serialize(null as never), null);
    assert.throws(() => s.deserialize(Buffer.from('plain text')), SerdeError);
    assert.throws(
      () => s.deserialize(frame(42, Buffer.from([2, 0x61]))),
      /schema id 42 was not fetched from the registry/,
    );
  }
});

test('a registry serde without a schema id for writing should say it is resolved at worker start', () => {
  const s = avro({ schema: { type: 'record', name: 'U', fields: [{ name: 'a', type: 'string' }] } });
  assert.throws(() => s.serialize({ a: 'x' }), /no schema id to write with/);
  assert.throws(() => avro().serialize({ a: 'x' }), /given no schema, so it cannot write/);
});

test('invalid schemas given to a serde should fail at once with the reason', () => {
  assert.throws(() => avro({ schema: { type: 'record', name: 'U' } }), /no valid Avro schema/);
  assert.throws(() => protobuf({ schema: 'syntax = "proto3"; message {' }), /no usable Protobuf schema/);
  assert.throws(
    () => protobuf({ schema: 'syntax = "proto3"; message A { string s = 1; }', messageType: 'B' }),
    /no message type B/,
  );
  assert.throws(() => jsonSchema({ schema: { type: 'nope' } }), /no usable JSON Schema/);
});
