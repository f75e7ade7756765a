/**
 * An example unit test of a job with `sluice/testing`: the page-views job (examples/page-views.ts)
 * without a broker. Run it with Node's test runner after a build:
 *   npx tsc && node --test dist/examples/driver.test.js
 * The same test runs under vitest or jest (ESM): only `test` and the assertions change.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TestDriver } from 'sluice/testing';
import { type Click, type PageViews, pageViewsApp } from './page-views.js';

const click = (user: string, page: string, bot = false): Click => ({ user, page, bot, ts: 0 });

test('page views should count human clicks per page, over 4 partitions', async () => {
  const driver = new TestDriver(pageViewsApp({ id: 'page-views-test' }), { partitions: 4 });
  try {
    const clicks = driver.input<string, Click>('clicks');
    await clicks.pipe('c1', click('ann', '/home'));
    await clicks.pipe('c2', click('bob', '/home'));
    await clicks.pipe('c3', click('crawler', '/home', true));
    await clicks.pipe('c4', click('ann', '/about'));

    const views = driver.output<string, PageViews>('page-views').readAll();
    // One output per human click, keyed by page, in the partition Kafka's partitioner gives it.
    assert.deepEqual(
      views.map((r) => r.value).sort((a, b) => a.page.localeCompare(b.page) || a.views - b.views),
      [
        { page: '/about', views: 1 },
        { page: '/home', views: 1 },
        { page: '/home', views: 2 },
      ],
    );
    assert.equal(driver.state('views').get('/home'), 2);
    assert.deepEqual(driver.deadLetters(), []);
  } finally {
    await driver.close();
  }
});

test('page views should count each click once across a crash (exactly-once)', async () => {
  // Commits only when asked, so that the crash has uncommitted work to lose.
  const driver = new TestDriver(pageViewsApp({ id: 'page-views-crash' }), {
    partitions: 2,
    commit: 'manual',
  });
  try {
    const clicks = driver.input<string, Click>('clicks');
    await clicks.pipe('c1', click('ann', '/home'));
    await driver.commit();
    await clicks.pipe('c2', click('bob', '/home'));
    await driver.crash();
    await driver.restart();
    await driver.commit();
    assert.deepEqual(
      driver
        .output<string, PageViews>('page-views')
        .readValues()
        .map((v) => v.views),
      [1, 2],
    );
  } finally {
    await driver.close();
  }
});
