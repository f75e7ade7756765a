import assert from 'node:assert/strict';
import { test } from 'node:test';
import { inCI, skipUnlessPresent } from '../helpers/prereq.js';

/** Issue 13.12: a test that the README counts as proof must not skip silently in CI. */
test('a missing prerequisite should skip a test on a developer machine and fail it in CI', () => {
  const skipped: Array<string | undefined> = [];
  const t = { skip: (m?: string) => void skipped.push(m) };
  assert.equal(skipUnlessPresent(t, undefined, { CI: 'true' }), false, 'present: runs');
  assert.equal(skipUnlessPresent(t, 'no chromium', {}), true);
  assert.deepEqual(skipped, ['no chromium']);
  assert.throws(
    () => skipUnlessPresent(t, 'no chromium', { CI: 'true' }),
    /prerequisite missing in CI.*no chromium/,
  );
  assert.equal(skipped.length, 1, 'not skipped in CI');
  assert.equal(inCI({ CI: '1' }), true);
  assert.equal(inCI({ CI: 'false' }), false);
  assert.equal(inCI({ CI: '' }), false);
});
