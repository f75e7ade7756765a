import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { App, json, string, tumbling, valueState } from '../../../src/index.js';
import { partitionForKey } from '../../../src/kafka/partitioner.js';
import { TestDriver } from '../../../src/testing/index.js';

/**
 * The test driver (`sluice/testing`) on the job shapes a user tests: stateless chains, keyed
 * counts over several partitions, windows, table joins, the dead-letter topic. No broker.
 */

test('a stateless map/filter job should output the mapped records it keeps, with key, timestamp and headers', async () => {
  const app = new App({ id: 'drv-stateless' });
  app
    .stream('words', { key: string(), value: json<{ w: string }>() })
    .filter((v) => v.w !== 'the')
    .map((v) => v.w.toUpperCase())
    .to('upper', { value: json<string>() });
  const driver = new TestDriver(app, { wallClock: 1_000 });
  try {
    const words = driver.input('words');
    await words.pipe('a', { w: 'hello' }, { timestamp: 5, headers: { trace: 'x1' } });
    await words.pipe('b', { w: 'the' });
    await words.pipe(null, { w: 'world' });
    const out = driver.output('upper').readAll();
    assert.deepEqual(
      out.map(({ key, value, timestamp, partition, headers }) => ({
        key,
        value,
        timestamp,
        partition,
        headers,
      })),
      [
        { key: 'a', value: 'HELLO', timestamp: 5, partition: 0, headers: { trace: 'x1' } },
        // Without a timestamp a record gets the driver's wall clock.
        { key: null, value: 'WORLD', timestamp: 1_000, partition: 0, headers: undefined },
      ],
    );
    assert.deepEqual(driver.output('upper').readAll(), [], 'readAll returns each record once');
    assert.equal(driver.output('upper').all().length, 2, 'all() re-reads the topic');
  } finally {
    await driver.close();
  }
});

/** Clicks re-keyed by user (a repartition topic) and counted per user. */
function clickCounts(id: string): App {
  const app = new App({ id });
  app
    .stream('clicks', { key: string(), value: json<{ user: string }>() })
    .keyBy((c) => c.user, { name: 'by-user' })
    .count({ name: 'clicks' })
    .to('counts', { value: json<number>() });
  return app;
}

test('keyBy + count over 4 partitions should count exactly and write each key to the partition the real partitioner picks', async () => {
  const driver = new TestDriver(clickCounts('drv-count'), { partitions: 4 });
  try {
    const users = ['ann', 'bob', 'cy', 'dee', 'eve', 'fay', 'gus'];
    const expected = new Map<string, number>();
    const clicks = driver.input('clicks');
    for (let i = 0; i < 50; i++) {
      const user = users[(i * 3 + 1) % users.length]!;
      expected.set(user, (expected.get(user) ?? 0) + 1);
      // Input keys are click ids: spread over the 4 input partitions by their own hash.
      await clicks.pipe(`click-${i}`, { user });
    }
    assert.equal(Object.keys(driver.assignment).length, 8, '2 sub-topologies × 4 partitions');
    const out = driver.output<string, number>('counts').readAll();
    assert.equal(out.length, 50, 'one count per click');
    const last = new Map<string, number>();
    for (const r of out) {
      assert.equal(r.partition, partitionForKey(Buffer.from(r.key), 4), `partition of ${r.key}`);
      assert.equal(r.value, (last.get(r.key) ?? 0) + 1, `${r.key} counts up by one`);
      last.set(r.key, r.value);
    }
    assert.deepEqual(last, expected);
    const counts = driver.state<string, number>('clicks');
    for (const [u, n] of expected) assert.equal(counts.get(u), n);
    assert.equal(counts.get('nobody'), undefined);
    assert.deepEqual(
      counts.all().map((e) => e.key),
      [...expected.keys()].sort(),
      'all() lists every key in byte order',
    );
    assert.deepEqual(
      counts.range('bob', 'eve').map((e) => e.key),
      ['bob', 'cy', 'dee'],
      'range is [from, to)',
    );
    // The input went where the partitioner put it; the repartition topic holds every click, and
    // the upstream tasks' watermarks (control records with no value, into every partition).
    const rp = driver.kafka.readAll('drv-count-by-user-repartition');
    const control = rp.filter((r) => r.headers?.['sluice.watermark'] !== undefined);
    assert.equal(rp.length - control.length, 50);
    assert.ok(control.length > 0 && control.every((r) => r.value === null && r.key === null));
    assert.deepEqual(new Set(control.map((r) => r.partition)), new Set([0, 1, 2, 3]));
  } finally {
    await driver.close();
  }
});

test('a tumbling window should close on event time only, and a processing-time timer on advanceWallClock', async () => {
  const app = new App({ id: 'drv-window' });
  app
    .stream('temps', { key: string(), value: json<number>() })
    .byKey()
    .window(tumbling(1_000), { name: 'per-second' })
    .count()
    .to('per-second', { value: json() });
  // A reminder 5 s of wall-clock time after each key's first record (processing time).
  app
    .stream('logins', { key: string(), value: json<string>() })
    .byKey()
    .process(
      {
        state: { seen: valueState<boolean>() },
        onRecord(_v, ctx) {
          if (ctx.state.seen.get()) return;
          ctx.state.seen.set(true);
          ctx.timers.atProcessingTime(ctx.timestamp + 5_000);
        },
        onTimer(ts, ctx) {
          ctx.emit(`remind ${ctx.key} at ${ts}`);
        },
      },
      { name: 'remind' },
    )
    .to('reminders', { value: json() });
  const driver = new TestDriver(app, { wallClock: 10_000 });
  try {
    const temps = driver.input('temps');
    await temps.pipe('a', 20, { timestamp: 100 });
    await temps.pipe('a', 21, { timestamp: 900 });
    await temps.pipe('b', 5, { timestamp: 999 });
    await driver.advanceWallClock(60_000);
    assert.deepEqual(driver.output('per-second').readAll(), [], 'wall-clock time closes no window');
    await temps.pipe('a', 22, { timestamp: 1_000 });
    const closed = driver
      .output('per-second')
      .readAll()
      .map((r) => [r.key, r.value, r.timestamp]);
    assert.deepEqual(closed, [
      ['a', { start: 0, end: 1_000, value: 2 }, 999],
      ['b', { start: 0, end: 1_000, value: 1 }, 999],
    ]);

    const logins = driver.input('logins');
    await logins.pipe('ann', 'web', { timestamp: driver.wallClock });
    await logins.pipe('ann', 'app', { timestamp: driver.wallClock });
    await driver.advanceWallClock(4_999);
    assert.deepEqual(driver.output('reminders').readValues(), []);
    await driver.advanceWallClock(1);
    assert.deepEqual(driver.output('reminders').readValues(), ['remind ann at 75000']);
    await driver.advanceWallClock(60_000);
    assert.deepEqual(driver.output('reminders').readValues(), [], 'a timer fires once');
  } finally {
    await driver.close();
  }
});

test('a stream-table join should join each order with the row the table has when the order comes', async () => {
  const app = new App({ id: 'drv-join' });
  const users = app.table('users', { key: string(), value: json<{ name: string }>() });
  app
    .stream('orders', { key: string(), value: json<{ n: number }>() })
    .byKey()
    .leftJoin(users, (o, u) => `${o.n} for ${u?.name ?? '?'}`, { name: 'enrich' })
    .to('enriched', { value: json() });
  const driver = new TestDriver(app, { partitions: 2 });
  try {
    const orders = driver.input('orders');
    await orders.pipe('u1', { n: 1 });
    await driver.input('users').pipe('u1', { name: 'Ann' });
    await orders.pipe('u1', { n: 2 });
    await driver.input('users').pipe('u1', { name: 'Annie' });
    await orders.pipe('u1', { n: 3 });
    await driver.input('users').pipe('u1', null);
    await orders.pipe('u1', { n: 4 });
    assert.deepEqual(driver.output('enriched').readValues(), [
      '1 for ?',
      '2 for Ann',
      '3 for Annie',
      '4 for ?',
    ]);
  } finally {
    await driver.close();
  }
});

test('a poison record should go to the dead-letter topic with its original bytes, and the job go on', async () => {
  const app = new App({ id: 'drv-dlq' });
  app
    .stream('in', { key: string(), value: json<{ n: number }>() })
    .map(
      (v) => {
        if (v.n === 13) throw new Error('unlucky');
        return v.n * 2;
      },
      { name: 'double' },
    )
    .to('out', { value: json() });
  const driver = new TestDriver(app);
  try {
    const input = driver.input('in');
    await input.pipe('a', { n: 1 });
    await input.pipeRaw(Buffer.from('b'), Buffer.from('{not json'), { timestamp: 42 });
    await input.pipe('c', { n: 13 });
    await input.pipe('d', { n: 2 });
    assert.deepEqual(driver.output('out').readValues(), [2, 4]);
    const dead = driver.deadLetters();
    assert.equal(dead.length, 2);
    assert.deepEqual(
      dead.map((d) => ({ key: d.key?.toString(), kind: d.error.kind, op: d.error.operator, src: d.source })),
      [
        {
          key: 'b',
          kind: 'deserialize',
          op: undefined,
          src: { topic: 'in', partition: 0, offset: 1, timestamp: 42 },
        },
        {
          key: 'c',
          kind: 'operator',
          op: 'double',
          src: { topic: 'in', partition: 0, offset: 2, timestamp: dead[1]!.source.timestamp },
        },
      ],
    );
    assert.equal(dead[0]!.value?.toString(), '{not json', 'the original bytes');
    assert.match(dead[1]!.error.message, /unlucky/);
  } finally {
    await driver.close();
  }
});

test('errorPolicy fail should reject the pipe and stop the job until restart', async () => {
  const app = new App({ id: 'drv-fail' });
  app
    .stream('in', { key: string(), value: json<number>() })
    .map((v) => {
      if (v < 0) throw new Error('negative');
      return v;
    })
    .to('out', { value: json() });
  const driver = new TestDriver(app, { config: { processing: { errorPolicy: 'fail' } } });
  try {
    await driver.input('in').pipe('a', 1);
    await assert.rejects(driver.input('in').pipe('b', -1), /SLUICE_OPERATOR|negative/);
    await assert.rejects(driver.input('in').pipe('c', 2), /the job failed/);
    // The poison is still there: a restarted worker meets it again.
    await assert.rejects(driver.restart(), /negative/);
    assert.deepEqual(driver.output('out').readValues(), [1]);
  } finally {
    await driver.close();
  }
});

test('close() should delete the state folders', async () => {
  const driver = new TestDriver(clickCounts('drv-close'), { state: 'rocksdb' });
  await driver.input('clicks').pipe('c1', { user: 'ann' });
  const dir = driver.config.state.dir;
  assert.ok(existsSync(dir), 'RocksDB folder while running');
  await driver.close();
  assert.equal(existsSync(dir), false);
  await assert.rejects(driver.input('clicks').pipe('c2', { user: 'ann' }), /closed/);
});

test('an output reader made before the start should not create the topic, and see its records later', async () => {
  const driver = new TestDriver(clickCounts('drv-early'), { partitions: 3 });
  try {
    const dlq = driver.output('drv-early-dlq');
    const counts = driver.output('counts');
    assert.deepEqual(dlq.readAll(), []);
    assert.ok(counts.isEmpty);
    assert.throws(() => driver.state('clicks').get('ann'), /not started/);
    await driver.input('clicks').pipe('c1', { user: 'ann' });
    assert.equal(driver.kafka.partitionCount('drv-early-dlq'), 3, 'the DLQ got its partitions from the plan');
    assert.deepEqual(counts.readValues(), [1]);
  } finally {
    await driver.close();
  }
});
