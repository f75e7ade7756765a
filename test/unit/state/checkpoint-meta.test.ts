import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type CheckpointMeta,
  decodeCheckpointMeta,
  encodeCheckpointMeta,
  fingerprintMismatch,
  fingerprintOf,
  recordHash,
} from '../../../src/state/checkpoint-meta.js';
import { CheckpointMetaError } from '../../../src/state/errors.js';

const meta: CheckpointMeta = {
  version: 1,
  changelogOffsets: { counts: '1042', 'last.seen': '0' },
  changelogLast: {
    counts: { offset: '1040', timestamp: '1700000000100', hash: '0123456789abcdef0123456789abcdef' },
  },
  writtenAt: 1_700_000_000_123,
};

test('checkpoint meta should round-trip through JSON bytes', () => {
  const bytes = encodeCheckpointMeta(meta);
  assert.ok(Buffer.isBuffer(bytes));
  assert.deepEqual(decodeCheckpointMeta(bytes), meta);
  const bare = { version: 1 as const, changelogOffsets: { big: '9223372036854775807' }, writtenAt: 0 };
  assert.deepEqual(decodeCheckpointMeta(encodeCheckpointMeta(bare)), bare);
});

test('checkpoint meta should drop unknown fields', () => {
  const bytes = Buffer.from(JSON.stringify({ ...meta, future: { x: 1 } }));
  assert.deepEqual(decodeCheckpointMeta(bytes), meta);
});

test('checkpoint meta should reject invalid entries with a corruption error', () => {
  const bad: Array<[string, unknown]> = [
    ['not json', '{'],
    ['an array', []],
    ['version 2', { ...meta, version: 2 }],
    ['no version', { ...meta, version: undefined }],
    ['negative offset', { ...meta, changelogOffsets: { counts: '-1' } }],
    ['numeric offset', { ...meta, changelogOffsets: { counts: 5 } }],
    ['leading zero', { ...meta, changelogOffsets: { counts: '012' } }],
    ['offset past int64', { ...meta, changelogOffsets: { counts: '9223372036854775808' } }],
    ['proto key', JSON.parse('{"version":1,"changelogOffsets":{"__proto__":"1"},"writtenAt":1}')],
    ['missing writtenAt', { ...meta, writtenAt: undefined }],
    ['fingerprint without hash', { ...meta, changelogLast: { counts: { offset: '1', timestamp: '2' } } }],
    [
      'fingerprint with a bad offset',
      { ...meta, changelogLast: { counts: { ...meta.changelogLast!.counts!, offset: 'x' } } },
    ],
    ['fingerprints not an object', { ...meta, changelogLast: [] }],
  ];
  for (const [what, value] of bad) {
    const bytes = Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));
    assert.throws(
      () => decodeCheckpointMeta(bytes),
      (err: unknown) => err instanceof CheckpointMetaError && err.code === 'SLUICE_TASK_CORRUPTED',
      what,
    );
  }
  assert.throws(() => encodeCheckpointMeta({ ...meta, writtenAt: Number.NaN }), TypeError);
});

test('a meta entry written before fingerprints should still decode, without changelogLast', () => {
  const old = Buffer.from(
    JSON.stringify({
      version: 1,
      changelogOffsets: { counts: '7' },
      inputOffsets: {},
      changelogTopicIds: { counts: 'kX3bHq9wTzuF3W1wq0b8_g' },
      writtenAt: 1,
    }),
  );
  assert.deepEqual(decodeCheckpointMeta(old), {
    version: 1,
    changelogOffsets: { counts: '7' },
    writtenAt: 1,
  });
});

test('a meta entry should not carry input offsets (never read: the group has them); older entries with them still decode', () => {
  const bytes = encodeCheckpointMeta({ version: 1, changelogOffsets: { counts: '7' }, writtenAt: 1 });
  assert.deepEqual(JSON.parse(bytes.toString()), {
    version: 1,
    changelogOffsets: { counts: '7' },
    writtenAt: 1,
  });
  const old = Buffer.from(
    JSON.stringify({
      version: 1,
      changelogOffsets: { counts: '7' },
      inputOffsets: { 'clicks:3': '98' },
      writtenAt: 1,
    }),
  );
  assert.deepEqual(decodeCheckpointMeta(old), {
    version: 1,
    changelogOffsets: { counts: '7' },
    writtenAt: 1,
  });
});

test('a changelog fingerprint should round-trip and match only the same record at the same offset', () => {
  const rec = {
    offset: 41n,
    timestamp: '1700000000000',
    key: Buffer.from('k1'),
    value: Buffer.from('{"n":3}'),
  };
  const fp = fingerprintOf(rec);
  assert.deepEqual(fp, { offset: '41', timestamp: '1700000000000', hash: recordHash(rec.key, rec.value) });
  const withFp = { ...meta, changelogLast: { counts: fp } };
  assert.deepEqual(decodeCheckpointMeta(encodeCheckpointMeta(withFp)), withFp);

  // The fetched copy has its offset as a string, as kafkajs hands it over.
  assert.equal(fingerprintMismatch(fp, { ...rec, offset: '41' }), undefined);
  assert.match(fingerprintMismatch(fp, undefined)!, /no record at offset 41/);
  assert.match(fingerprintMismatch(fp, { ...rec, offset: '45' })!, /is at 45/);
  assert.match(fingerprintMismatch(fp, { ...rec, offset: '41', timestamp: '1' })!, /timestamp 1/);
  assert.match(
    fingerprintMismatch(fp, { ...rec, offset: '41', value: Buffer.from('{"n":4}') })!,
    /another key or value/,
  );
  assert.match(fingerprintMismatch(fp, { ...rec, offset: '41', key: Buffer.from('k2') })!, /another key/);
});

test('the record hash should tell a null from an empty buffer and keep key and value apart', () => {
  const hashes = [
    recordHash(null, null),
    recordHash(Buffer.alloc(0), null),
    recordHash(null, Buffer.alloc(0)),
    recordHash(Buffer.from('ab'), Buffer.from('c')),
    recordHash(Buffer.from('a'), Buffer.from('bc')),
  ];
  assert.equal(new Set(hashes).size, hashes.length);
  for (const h of hashes) assert.match(h, /^[0-9a-f]{32}$/);
});
