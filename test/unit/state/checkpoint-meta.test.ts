import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type CheckpointMeta,
  decodeCheckpointMeta,
  encodeCheckpointMeta,
} from '../../../src/state/checkpoint-meta.js';
import { CheckpointMetaError } from '../../../src/state/errors.js';

const meta: CheckpointMeta = {
  version: 1,
  changelogOffsets: { counts: '1042', 'last.seen': '0' },
  inputOffsets: { 'clicks:3': '98213', 'a:b:0': '9223372036854775807' },
  changelogTopicIds: { counts: 'kX3bHq9wTzuF3W1wq0b8_g' },
  writtenAt: 1_700_000_000_123,
};

test('checkpoint meta should round-trip through JSON bytes', () => {
  const bytes = encodeCheckpointMeta(meta);
  assert.ok(Buffer.isBuffer(bytes));
  assert.deepEqual(decodeCheckpointMeta(bytes), meta);
  const bare = { version: 1 as const, changelogOffsets: {}, inputOffsets: {}, writtenAt: 0 };
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
    ['leading zero', { ...meta, inputOffsets: { 'clicks:3': '012' } }],
    ['offset past int64', { ...meta, inputOffsets: { 'clicks:3': '9223372036854775808' } }],
    ['input key without partition', { ...meta, inputOffsets: { clicks: '1' } }],
    [
      'proto key',
      JSON.parse('{"version":1,"changelogOffsets":{"__proto__":"1"},"inputOffsets":{},"writtenAt":1}'),
    ],
    ['missing writtenAt', { ...meta, writtenAt: undefined }],
    ['empty topic id', { ...meta, changelogTopicIds: { counts: '' } }],
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
