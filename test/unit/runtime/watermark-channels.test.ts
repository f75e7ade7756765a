import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Watermark } from '../../../src/runtime/watermark.js';

test('a repartition input should stand at the minimum of its writers’ watermarks, held until every writer announced one', () => {
  const wm = new Watermark(100);
  wm.reset(['r'], 0);
  assert.ok(wm.announce('r', '0/2/5000', 0));
  assert.equal(wm.advance(0), undefined, 'writer 1 has not announced: held');
  wm.announce('r', Buffer.from('1/2/3000'), 0);
  assert.equal(wm.advance(0), 3000, 'the minimum; the disorder is not subtracted twice');
  wm.announce('r', '1/2/9000', 0);
  assert.equal(wm.advance(0), 5000);
  wm.announce('r', '1/2/1000', 0); // a repeat of an older one (at-least-once): a writer never goes back
  assert.equal(wm.advance(0), undefined);
  assert.equal(wm.value, 5000);
  assert.equal(wm.announce('r', 'garbage', 0), false);
  assert.equal(wm.announce('r', '2/2/1', 0), false, 'no writer 2 of 2');
});

test('writers’ watermarks should survive a restart through the offset metadata', () => {
  const wm = new Watermark(0);
  wm.reset(['r'], 0);
  wm.announce('r', '0/3/7000', 0);
  wm.announce('r', '2/3/4000', 0);
  const meta = wm.metadataOf('r');
  assert.deepEqual(JSON.parse(meta!), { c: [7000, null, 4000] });
  const again = new Watermark(0);
  again.reset(['r'], 0);
  again.restore('r', meta);
  assert.equal(again.advance(0), undefined, 'writer 1 still unknown');
  again.announce('r', '1/3/6000', 0);
  assert.equal(again.advance(0), 4000);
  assert.equal(JSON.parse(again.metadataOf('r')!).t, 4000);
});

test('with the idle timeout, a writer silent that long should stop holding a repartition input back', () => {
  const wm = new Watermark(0, { timeoutMs: 1000, advanceMs: 0 });
  wm.reset(['r'], 0);
  wm.announce('r', '0/2/5000', 10);
  assert.equal(wm.advance(500), undefined);
  wm.announce('r', '0/2/6000', 1100);
  assert.equal(
    wm.advance(1200),
    6000,
    'writer 1, never heard from since the start, is idle; writer 0 is not',
  );
});
