import assert from 'node:assert/strict';
import { test } from 'node:test';
import { joiningReason } from '../../../src/ops/readiness.js';

test('joiningReason should explain a long join by the session timeout of a dead member', () => {
  assert.equal(joiningReason(500, 30_000), 'joining the group');
  const long = joiningReason(12_400, 30_000);
  assert.match(long, /^joining the group for 12 s: /);
  assert.match(long, /once its session times out \(kafka\.sessionTimeoutMs = 30000 ms\)/);
});
