import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  closest,
  closeToExisting,
  didYouMean,
  editDistance,
  maxSuggestDistance,
  typoWarning,
} from '../../src/suggest.js';

test('editDistance should count insertions, deletions, substitutions and neighbour swaps as 1', () => {
  assert.equal(editDistance('orders', 'orders'), 0);
  assert.equal(editDistance('oders', 'orders'), 1);
  assert.equal(editDistance('orders', 'ordes'), 1);
  assert.equal(editDistance('orders', 'orderz'), 1);
  assert.equal(editDistance('gaurantee', 'guarantee'), 1);
  assert.equal(editDistance('', 'abc'), 3);
  assert.equal(editDistance('abc', ''), 3);
  assert.equal(editDistance('kitten', 'sitting'), 3);
  assert.equal(editDistance('ab', 'ba'), 1);
});

test('editDistance should be symmetric', () => {
  const words = ['clicks', 'clikcs', 'page-views', 'pageviews', 'a', '', 'processing.guarantee'];
  for (const a of words)
    for (const b of words) assert.equal(editDistance(a, b), editDistance(b, a), `${a} ${b}`);
});

test('closest should suggest within 2 edits (1 for short names), case-insensitively, never the name itself', () => {
  const topics = ['orders', 'payments', 'page-views', 'in', 'out'];
  assert.equal(closest('oders', topics), 'orders');
  assert.equal(closest('paymnets', topics), 'payments');
  assert.equal(closest('Orders', topics), 'orders');
  assert.equal(closest('pageviews', topics), 'page-views');
  assert.equal(closest('orders', topics), undefined, 'an exact match is no suggestion');
  assert.equal(closest('customers', topics), undefined);
  assert.equal(closest('ot', topics), 'out');
  assert.equal(closest('xy', topics), undefined, 'two edits are too many for a short name');
  assert.equal(maxSuggestDistance('abcd'), 1);
  assert.equal(maxSuggestDistance('abcde'), 2);
  assert.equal(closest('ab', []), undefined);
});

test('closest should prefer the nearest candidate and the first of equals', () => {
  assert.equal(closest('orderss', ['orders-x', 'orders']), 'orders');
  assert.equal(closest('abcx', ['abcy', 'abcz']), 'abcy');
});

test('didYouMean should phrase the suggestion or say nothing', () => {
  assert.equal(didYouMean('oders', ['orders']), ' (did you mean "orders"?)');
  assert.equal(didYouMean('zzz', ['orders']), '');
});

test('closeToExisting should name each new topic that is close to an existing one', () => {
  assert.deepEqual(closeToExisting(['oders', 'orders', 'payments', 'page-veiws'], ['orders', 'page-views']), [
    { name: 'oders', similar: 'orders' },
    { name: 'page-veiws', similar: 'page-views' },
  ]);
  assert.deepEqual(closeToExisting(['a', 'b'], []), []);
  assert.equal(
    typoWarning({ name: 'oders', similar: 'orders' }),
    'warning: creating topic "oders", but "orders" exists: a typo?',
  );
});
