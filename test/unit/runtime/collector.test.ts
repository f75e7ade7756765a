import assert from 'node:assert/strict';
import { test } from 'node:test';
import { partitionForKey } from '../../../src/kafka/partitioner.js';
import { toSends } from '../../../src/kafka/producer.js';
import { BATCH_HEADER, BUILDER_BYTES, recordCount } from '../../../src/kafka/record-batch.js';
import { Collector, RecordTooLargeError } from '../../../src/runtime/collector.js';

const key = (i: number) => Buffer.from(`key-${i}`);

test('without partition counts every output is a plain record, as before', () => {
  const c = new Collector();
  c.emit('out', key(1), Buffer.from('a'), 1000, undefined);
  c.emit('out', null, Buffer.from('b'), 0, { h: 'x' }, 3);
  const out = c.drain();
  assert.deepEqual(out.get('out'), [
    { key: key(1), value: Buffer.from('a'), timestamp: '1000' },
    { key: null, value: Buffer.from('b'), timestamp: '0', headers: { h: 'x' }, partition: 3 },
  ]);
  assert.equal(c.count, 0);
});

test('with partition counts, keyed outputs go into one batch per partition, by the key hash', () => {
  const c = new Collector();
  c.partitionsOf = (t) => (t === 'out' ? 4 : undefined);
  for (let i = 0; i < 100; i++) c.emit('out', key(i), Buffer.from(`v${i}`), 1000 + i, undefined);
  c.emit('out', null, Buffer.from('keyless'), 5, undefined); // round robin at the send: plain
  c.emit('out', null, null, 7, { w: '1' }, 2); // a given partition: into its batch
  c.emit('other', key(1), Buffer.from('x'), 9, undefined); // a topic the metadata does not know
  assert.equal(c.count, 103);
  const out = c.drain();
  const entries = out.get('out')!;
  assert.equal(recordCount(entries), 102);
  const batches = entries.filter((e) => e.batch !== undefined);
  assert.equal(batches.length, 4);
  for (const e of batches) {
    assert.equal(e.partition, e.batch!.partition);
    const expected = Array.from({ length: 100 }, (_, i) => i).filter(
      (i) => partitionForKey(key(i), 4) === e.partition,
    );
    assert.equal(e.batch!.count, expected.length + (e.partition === 2 ? 1 : 0));
    assert.deepEqual(
      [...e.batch!.stamps.subarray(0, expected.length)],
      expected.map((i) => 1000 + i),
    );
  }
  assert.deepEqual(
    entries.filter((e) => e.batch === undefined),
    [{ key: null, value: Buffer.from('keyless'), timestamp: '5' }],
  );
  assert.equal(out.get('other')![0]!.timestamp, '9');
  // The interval's partition counts are read again after a drain.
  c.partitionsOf = () => undefined;
  c.emit('out', key(1), Buffer.from('a'), 1, undefined);
  assert.equal(c.drain().get('out')![0]!.batch, undefined);
});

test('truncate takes outputs back from batches and plain lists alike; an emptied batch is left out', () => {
  const c = new Collector();
  c.partitionsOf = (t) => (t === 'out' ? 2 : undefined);
  c.emit('out', key(1), Buffer.from('kept'), 1, undefined);
  const mark = c.count;
  c.emit('out', key(2), Buffer.from('dropped'), 2, undefined);
  c.emit('plain', key(3), Buffer.from('dropped'), 3, undefined);
  c.emit('out', key(4), Buffer.from('dropped'), 4, undefined);
  c.truncate(mark);
  assert.equal(c.count, 1);
  const out = c.drain();
  assert.equal(recordCount(out.get('out')!), 1);
  assert.equal(out.get('out')!.length, 1, 'the batch of the other partition held only taken-back records');
  assert.equal(out.get('plain'), undefined);
});

test('a builder stays within its bound: the record that would pass it starts the next one', () => {
  const c = new Collector();
  c.partitionsOf = () => 1;
  const value = Buffer.alloc(100_000, 1);
  for (let i = 0; i < 12; i++) c.emit('out', key(i), value, i, undefined);
  c.emit('out', key(99), Buffer.alloc(BUILDER_BYTES + 1000, 2), 99, undefined); // alone in its own
  c.emit('out', key(100), value, 100, undefined);
  const list = c.drain().get('out')!;
  assert.equal(recordCount(list), 14);
  assert.deepEqual(
    list.map((e) => e.batch!.count),
    [5, 5, 2, 1, 1],
  );
  for (const e of list.slice(0, 3)) assert.ok(e.batch!.len <= BUILDER_BYTES);
});

test('a timestamp that is not a whole number of ms gets the time of the write, in its place in the batch', () => {
  const c = new Collector();
  c.partitionsOf = () => 1;
  const before = Date.now();
  c.emit('out', key(1), Buffer.from('a'), 5, undefined);
  c.emit('out', key(2), Buffer.from('b'), Number.NaN, undefined);
  c.emit('out', key(3), Buffer.from('c'), 1.5, undefined);
  c.emit('out', key(4), Buffer.from('d'), 7, undefined);
  const list = c.drain().get('out')!;
  assert.equal(list.length, 1, 'one batch, in order');
  const stamps = [...list[0]!.batch!.stamps.subarray(0, 4)];
  assert.equal(stamps[0], 5);
  assert.ok(stamps[1]! >= before && stamps[2]! >= before);
  assert.equal(stamps[3], 7);
});

test('an output that fails to be written leaves the count and the marks as they were', () => {
  const c = new Collector();
  c.partitionsOf = () => 1;
  c.emit('out', key(1), Buffer.from('kept'), 1, undefined);
  const mark = c.count;
  const bad = {
    toString() {
      throw new Error('not a header value');
    },
  };
  assert.throws(() => c.emit('out', key(2), Buffer.from('x'), 2, { bad }), /not a header value/);
  assert.equal(c.count, mark);
  c.emit('out', key(3), Buffer.from('y'), 3, undefined);
  c.truncate(mark);
  const list = c.drain().get('out')!;
  assert.equal(recordCount(list), 1, 'the record before the mark is still there');
});

test("an output over its topic's max.message.bytes should throw where it is emitted and leave nothing behind", () => {
  const c = new Collector();
  c.limits = new Map([['small', 1000]]);
  c.emit('small', key(1), Buffer.alloc(900), 0, undefined);
  assert.throws(
    () => c.emit('small', key(2), Buffer.alloc(950), 0, undefined),
    (e: unknown) =>
      e instanceof RecordTooLargeError && /over the 1000 bytes topic small takes/.test(e.message),
  );
  assert.throws(
    () => c.emit('small', key(3), Buffer.alloc(800), 0, { h: 'z'.repeat(200) }),
    RecordTooLargeError,
  );
  c.emit('other', key(4), Buffer.alloc(5000), 0, undefined); // no bound known: not checked
  assert.equal(c.count, 2);
  assert.deepEqual(
    [...c.drain()].map(([t, l]) => [t, l.length]),
    [
      ['small', 1],
      ['other', 1],
    ],
  );
});

test('a topic that takes less than a builder holds should get builders and sends under its max.message.bytes', () => {
  const c = new Collector();
  c.partitionsOf = () => 2;
  c.limits = new Map([['small', 2000]]);
  for (let i = 0; i < 100; i++) c.emit('small', key(i), Buffer.alloc(100), 0, undefined);
  const out = c.drain();
  const entries = out.get('small')!;
  assert.equal(recordCount(entries), 100);
  assert.ok(entries.length > 2, 'several builders per partition');
  for (const e of entries) assert.ok(e.batch!.size <= 2000, `a builder of ${e.batch!.size} bytes`);
  assert.ok(BUILDER_BYTES > 2000);
});

test("builders of one partition merged into one batch in a send should stay under the topic's max.message.bytes", () => {
  // Two tasks write partition 0 (a repartition topic, say), their records' times far apart:
  // merged, the second builder's records get larger timestamp deltas (written again, rebased).
  const limits = new Map([['small', 2000]]);
  const builders = [0, 1e12].map((ts) => {
    const c = new Collector();
    c.partitionsOf = () => 1;
    c.limits = limits;
    for (let i = 0; i < 80; i++) c.emit('small', Buffer.from('k'), Buffer.from('v'), ts + i, undefined);
    return c.drain().get('small')!;
  });
  const all = new Map([['small', builders.flat()]]);
  for (const send of toSends(all, () => 1, limits))
    for (const { messages } of send) {
      // What the encoder writes: one batch, every builder after the first rebased on the first's.
      const first = messages[0]!.batch!;
      let bytes = BATCH_HEADER;
      let index = 0;
      for (const m of messages) {
        bytes += m.batch!.sizeRebased(first.first, index);
        index += m.batch!.count;
      }
      assert.ok(bytes <= 2000, `a merged batch of ${bytes} bytes`);
    }
});
