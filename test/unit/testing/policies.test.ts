import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, json, string } from '../../../src/index.js';
import { TestDriver } from '../../../src/testing/index.js';

/**
 * Error policies end to end (test/unit/runtime/operators.test.ts checks the compiled wrappers by
 * hand; here the whole task runs them): an operator's own `onError` wins over the app's policy,
 * the dead letter names the operator that threw, and a record that fails halfway leaves none of
 * its outputs behind.
 */
test('onError per operator should win over the app policy, and a failed record take back its partial outputs', async () => {
  const app = new App({ id: 'drv-policies' });
  app
    .stream('in', { key: string(), value: json<number>() })
    .map(
      (v) => {
        if (v === -1) throw new Error('minus one');
        if (v === 7) throw 'seven';
        return v;
      },
      { name: 'inc', onError: 'dlq' },
    )
    // Emits the value twice; throws on the second copy of 13, after the first went to the sink.
    .flatMap((v) => [v, v === 13 ? -13 : v], { name: 'twice' })
    .map(
      (v) => {
        if (v === -13) throw new Error('thirteen');
        if (v === 99) throw new Error('ninety-nine');
        return v;
      },
      { name: 'after', onError: 'skip' },
    )
    .to('out', { value: json() });
  // The app's policy is `fail`; the operators' own policies apply instead.
  const driver = new TestDriver(app, { config: { processing: { errorPolicy: 'fail' } } });
  try {
    const input = driver.input('in');
    for (const v of [1, -1, 7, 13, 99, 2]) await input.pipe(`k${v}`, v);
    assert.deepEqual(driver.output('out').readValues(), [1, 1, 2, 2], 'nothing of 13 or 99 (skipped by `after`)');
    assert.deepEqual(
      driver.deadLetters().map((d) => [d.key?.toString(), d.error.operator, d.error.message]),
      [
        ['k-1', 'inc', 'minus one'],
        ['k7', 'inc', 'seven'],
      ],
    );
  } finally {
    await driver.close();
  }
});
