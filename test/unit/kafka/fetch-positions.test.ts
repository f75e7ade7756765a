import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EachBatchPayload, Kafka } from 'kafkajs';
import { type BatchContext, GroupConsumer } from '../../../src/kafka/consumer.js';
import { FetchPositions } from '../../../src/kafka/fetch-positions.js';

test('a batch fetched from beyond the position is sought back; contiguous ones are taken', () => {
  const p = new FetchPositions();
  // Unknown position (before the task's first seek): taken.
  assert.deepEqual(p.check('in', 0, '500'), { kind: 'take' });
  p.sought('in', 0, '100');
  assert.deepEqual(p.check('in', 0, '100'), { kind: 'take' });
  // Below: a re-fetch of records the task skips itself.
  assert.deepEqual(p.check('in', 0, '40'), { kind: 'take' });
  // The answer to a fetch made before the seek, from where the task stood before its reset.
  assert.deepEqual(p.check('in', 0, '150'), { kind: 'seek', to: '100' });
  // The fetch from the position, after the seek back: taken; the last record taken moves it.
  assert.deepEqual(p.check('in', 0, '100'), { kind: 'take' });
  p.resolved('in', 0, '119');
  assert.deepEqual(p.check('in', 0, '120'), { kind: 'take' });
  assert.deepEqual(p.check('in', 0, '121'), { kind: 'seek', to: '120' });
  // A batch of markers only, resolved by kafkajs: the next fetch starts after it.
  p.skipped('in', 0, '120');
  assert.deepEqual(p.check('in', 0, '121'), { kind: 'take' });
  // Partitions are apart.
  assert.deepEqual(p.check('in', 1, '121'), { kind: 'take' });
  p.sought('in', 1, '7');
  assert.deepEqual(p.check('in', 1, '8'), { kind: 'seek', to: '7' });
  assert.deepEqual(p.check('in', 0, '121'), { kind: 'take' });
});

test('beyond the position again right after a seek back there is a gap in the log, taken once', () => {
  const p = new FetchPositions();
  p.sought('in', 0, '200');
  assert.deepEqual(p.check('in', 0, '300'), { kind: 'seek', to: '200' });
  // kafkajs went on from the log's start (OffsetOutOfRange): 200 is gone.
  assert.deepEqual(p.check('in', 0, '300'), { kind: 'gap', from: '200', to: '300' });
  p.resolved('in', 0, '310');
  assert.deepEqual(p.check('in', 0, '312'), { kind: 'seek', to: '311' });
  // A seek in between starts over: the next batch beyond is sought back again.
  p.sought('in', 0, '200');
  assert.deepEqual(p.check('in', 0, '300'), { kind: 'seek', to: '200' });
  p.sought('in', 0, '250');
  assert.deepEqual(p.check('in', 0, '300'), { kind: 'seek', to: '250' });
});

test('a new assignment forgets the partitions no longer assigned', () => {
  const p = new FetchPositions();
  p.sought('in', 0, '10');
  p.sought('in', 1, '10');
  p.retain([{ topic: 'in', partition: 1 }]);
  assert.deepEqual(p.check('in', 0, '50'), { kind: 'take' });
  assert.deepEqual(p.check('in', 1, '50'), { kind: 'seek', to: '10' });
});

/** kafkajs's consumer as far as GroupConsumer uses it: the handlers it registers, the seeks it makes. */
function fakeKafka() {
  const listeners = new Map<string, (e: { payload: any }) => void>();
  const seeks: Array<{ topic: string; partition: number; offset: string }> = [];
  let eachBatch: ((p: EachBatchPayload) => Promise<void>) | undefined;
  const consumer = {
    events: { GROUP_JOIN: 'join', END_BATCH_PROCESS: 'end', CRASH: 'crash' },
    on: (name: string, f: (e: { payload: any }) => void) => listeners.set(name, f),
    connect: async () => {},
    subscribe: async () => {},
    run: async (o: { eachBatch: typeof eachBatch }) => {
      eachBatch = o.eachBatch;
    },
    seek: (s: { topic: string; partition: number; offset: string }) => seeks.push(s),
    disconnect: async () => {},
  };
  const kafka = { consumer: () => consumer } as unknown as Kafka;
  const pending = new Set<string>();
  /** Hands a batch fetched from `fetchedOffset` to the consumer's handler. */
  /** `fetchedTo`: the fetch's last offset when markers follow the last record. */
  const deliver = async (partition: number, fetchedOffset: string, offsets: string[], fetchedTo?: string) => {
    const resolved: string[] = [];
    const batch = {
      topic: 'in',
      partition,
      fetchedOffset,
      highWatermark: '1000',
      messages: offsets.map((offset) => ({ offset, key: null, value: null, timestamp: '0', headers: {} })),
      lastOffset: () => fetchedTo ?? offsets[offsets.length - 1]!,
    };
    await eachBatch!({
      batch,
      isStale: () => pending.has(`in:${partition}`),
      resolveOffset: (o: string) => resolved.push(o),
      heartbeat: async () => {},
    } as unknown as EachBatchPayload);
    return resolved;
  };
  return { kafka, listeners, seeks, deliver, pending };
}

test('the consumer drops a batch fetched before a seek and seeks back, and takes the fetch from the position', async () => {
  const f = fakeKafka();
  const warnings: string[] = [];
  const logger = { warn: (_o: unknown, m: string) => warnings.push(m), info() {}, debug() {}, error() {} };
  const c = new GroupConsumer(
    f.kafka,
    { sessionTimeoutMs: 10_000, heartbeatIntervalMs: 3_000 } as never,
    {
      groupId: 'g',
      topics: ['in'],
      readCommitted: true,
      concurrency: 1,
      maxBytesPerPartition: 1 << 20,
      layout: { subtopologyOf: () => 0 },
      memberInfo: () => ({ tasks: [] }),
    } as never,
    logger as never,
  );
  const processed: string[][] = [];
  await c.start({
    onAssignment() {},
    onBatch: async (b: BatchContext) => {
      if (b.isStale()) return;
      processed.push(b.records.map((r) => r.offset));
      b.resolveOffset(b.records[b.records.length - 1]!.offset);
    },
    onFatal() {},
  } as never);
  try {
    // A task (re)starts: it seeks its partition to its committed offset, 100.
    c.seek('in', 0, '100');
    assert.deepEqual(f.seeks, [{ topic: 'in', partition: 0, offset: '100' }]);
    // kafkajs's own check: the seek is pending, the batch is stale.
    f.pending.add('in:0');
    assert.deepEqual(await f.deliver(0, '150', ['150', '151']), []);
    // Another fetcher took the seek; the old fetch's answer comes after it.
    f.pending.delete('in:0');
    assert.deepEqual(await f.deliver(0, '150', ['150', '151']), [], 'not resolved');
    assert.deepEqual(processed, [], 'not processed');
    assert.deepEqual(f.seeks[1], { topic: 'in', partition: 0, offset: '100' }, 'sought back');
    assert.equal(warnings.length, 1);
    // The fetch from the position is processed, and so is the next one.
    assert.deepEqual(await f.deliver(0, '100', ['100', '101']), ['101']);
    assert.deepEqual(await f.deliver(0, '102', ['102']), ['102']);
    // A batch of a transaction's marker only, which kafkajs resolves itself.
    f.listeners.get('end')!({
      payload: { topic: 'in', partition: 0, batchSize: 0, lastOffset: '103', highWatermark: '104' },
    });
    assert.deepEqual(await f.deliver(0, '104', ['105']), ['105']);
    // A transaction's last record and its marker: kafkajs resolves the marker with the record.
    assert.deepEqual(await f.deliver(0, '106', ['106'], '107'), ['106']);
    assert.deepEqual(await f.deliver(0, '108', ['108']), ['108']);
    assert.deepEqual(processed, [['100', '101'], ['102'], ['105'], ['106'], ['108']]);
    assert.equal(f.seeks.length, 2);
  } finally {
    await c.stop();
  }
});
