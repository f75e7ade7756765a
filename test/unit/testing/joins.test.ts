import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TestDriver } from '../../../src/testing/index.js';

/**
 * The joins fixture job (test/fixtures/jobs/joins.ts, run against a broker by
 * test/integration/joins.test.ts) with the test driver: a windowed stream-stream join with
 * out-of-order input on both sides, and two streams connected through shared keyed state.
 */
process.env.TEST_APP_ID = 'unit-joins';
const { default: app } = await import('../../fixtures/jobs/joins.js');
const t = (n: string) => `unit-joins-${n}`;

test('a stream-stream join should pair every two records of a key at most `within` apart once, whichever side comes first', async () => {
  const driver = new TestDriver(app, { partitions: 2 });
  try {
    const left = driver.input(t('left'));
    const right = driver.input(t('right'));
    await left.pipe('a', { k: 'a', v: 1, t: 10_000 });
    await right.pipe('a', { k: 'a', v: 2, t: 11_500 }); // 1.5 s after: pairs
    await right.pipe('a', { k: 'a', v: 3, t: 9_000 }); // out of order, 1 s before: pairs
    await right.pipe('a', { k: 'a', v: 4, t: 12_500 }); // 2.5 s after: no pair
    await left.pipe('a', { k: 'a', v: 5, t: 12_000 }); // pairs with 2 (11.5) and 4 (12.5)
    await right.pipe('b', { k: 'b', v: 6, t: 10_000 }); // another key: nothing
    const pairs = driver
      .output(t('pairs'))
      .readValues()
      .map((p: { l: number; r: number }) => `${p.l}-${p.r}`)
      .sort();
    assert.deepEqual(pairs, ['1-2', '1-3', '5-2', '5-4']);
  } finally {
    await driver.close();
  }
});

test('connected streams should share keyed state: a block on one stream filters the other', async () => {
  const driver = new TestDriver(app, { partitions: 2 });
  try {
    const words = driver.input(t('words'));
    const blocks = driver.input(t('blocks'));
    await words.pipe('x', { w: 'hello', n: 1 });
    await blocks.pipe('x', { blocked: true });
    await words.pipe('x', { w: 'hidden', n: 2 });
    await words.pipe('y', { w: 'other key', n: 3 });
    await blocks.pipe('x', { blocked: false });
    await words.pipe('x', { w: 'again', n: 4 });
    const allowed = driver
      .output(t('allowed'))
      .readValues()
      .map((w: { w: string }) => w.w)
      .sort();
    assert.deepEqual(allowed, ['again', 'hello', 'other key']);
    assert.equal(driver.state('block').get('x'), undefined, 'unblocked: the state cleared');
  } finally {
    await driver.close();
  }
});
