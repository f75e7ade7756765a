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
    assert.deepEqual(
      driver.output('out').readValues(),
      [1, 1, 2, 2],
      'nothing of 13 or 99 (skipped by `after`)',
    );
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

test('shedding in divert mode should send every shed record to the overflow topic: kept + diverted = input', async () => {
  const app = new App({ id: 'drv-shed' });
  app
    .stream('in', { key: string(), value: json<number>() })
    .map((v) => v * 10)
    .to('out', { value: json() });
  const driver = new TestDriver(app, { partitions: 2, config: { overload: { mode: 'divert' } } });
  try {
    const input = driver.input('in');
    for (let i = 0; i < 10; i++) await input.pipe(`k${i}`, i);
    await driver.shed(1);
    for (let i = 10; i < 20; i++) await input.pipe(`k${i}`, i);
    await driver.shed(0.5);
    for (let i = 20; i < 60; i++) await input.pipe(`k${i}`, i);
    const kept = driver.output('out').readValues() as number[];
    const diverted = driver.output('drv-shed-overflow', { value: json<number>() }).readValues();
    const keptIn = new Set(kept.map((v) => v / 10));
    for (let i = 0; i < 10; i++) assert.ok(keptIn.has(i), `${i}: kept before shedding`);
    for (let i = 10; i < 20; i++) assert.ok(diverted.includes(i), `${i}: p = 1 diverts every record`);
    assert.equal(kept.length + diverted.length, 60, 'nothing lost, nothing twice');
    assert.deepEqual(
      [...kept.map((v) => v / 10), ...diverted].sort((a, b) => a - b),
      Array.from({ length: 60 }, (_, i) => i),
    );
  } finally {
    await driver.close();
  }
});
