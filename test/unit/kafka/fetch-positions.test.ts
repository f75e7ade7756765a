import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import type { EachBatchPayload, Kafka } from 'kafkajs';
import { type BatchContext, GroupConsumer } from '../../../src/kafka/consumer.js';
import { FetchPositions, MAX_DROPS } from '../../../src/kafka/fetch-positions.js';
import { FETCH_GUARD, type FetchGuard, fetchGuardPatched } from '../../../src/kafka/kafkajs-fetch-guard.js';

const require = createRequire(import.meta.url);
const Runner = require('kafkajs/src/consumer/runner.js');
const ConsumerGroup = require('kafkajs/src/consumer/consumerGroup.js');
const OffsetManager = require('kafkajs/src/consumer/offsetManager/index.js');

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
  p.resolved('in', 0, '120');
  assert.deepEqual(p.check('in', 0, '121'), { kind: 'take' });
  // Partitions are apart.
  assert.deepEqual(p.check('in', 1, '121'), { kind: 'take' });
  p.sought('in', 1, '7');
  assert.deepEqual(p.check('in', 1, '8'), { kind: 'seek', to: '7' });
  assert.deepEqual(p.check('in', 0, '121'), { kind: 'take' });
});

test('batches beyond the position after several seeks back there are taken, and the gap logged', () => {
  const p = new FetchPositions();
  p.sought('in', 0, '200');
  for (let i = 0; i < MAX_DROPS; i++) assert.deepEqual(p.check('in', 0, '300'), { kind: 'seek', to: '200' });
  assert.deepEqual(p.check('in', 0, '300'), { kind: 'gap', from: '200', to: '300' });
  p.resolved('in', 0, '310');
  assert.deepEqual(p.check('in', 0, '312'), { kind: 'seek', to: '311' });
  // A batch taken at the position in between starts the count over.
  p.sought('in', 0, '200');
  for (let i = 0; i < MAX_DROPS - 1; i++) p.check('in', 0, '300');
  assert.deepEqual(p.check('in', 0, '200'), { kind: 'take' });
  assert.deepEqual(p.check('in', 0, '300'), { kind: 'seek', to: '200' });
  // So does a seek.
  p.sought('in', 0, '250');
  assert.deepEqual(p.check('in', 0, '300'), { kind: 'seek', to: '250' });
});

test('a new generation forgets every position', () => {
  const p = new FetchPositions();
  p.sought('in', 0, '10');
  p.clear();
  assert.deepEqual(p.check('in', 0, '50'), { kind: 'take' });
});

test('while a seek is pending, neither a resolve nor a reset moves the position; the seek does', () => {
  let pending = true;
  const p = new FetchPositions(() => pending);
  p.sought('in', 0, '40');
  p.resolved('in', 0, '99');
  p.reset('in', 0, '60');
  assert.deepEqual(p.check('in', 0, '41'), { kind: 'seek', to: '40' });
  pending = false;
  p.reset('in', 0, '60');
  assert.deepEqual(p.check('in', 0, '60'), { kind: 'take' });
  p.resolved('in', 0, '99');
  assert.deepEqual(p.check('in', 0, '101'), { kind: 'seek', to: '100' });
});

test('kafkajs resolves a batch of markers only if the guard takes it, and tells the guard an out-of-range reset', async () => {
  assert.equal(fetchGuardPatched, true);
  const asked: string[] = [];
  let take = false;
  const resets: unknown[] = [];
  const guard: FetchGuard = {
    takeSkipped: (topic, partition, fetchedOffset) => {
      asked.push(`${topic}:${partition}@${fetchedOffset}`);
      return take;
    },
    reset: (...a) => resets.push(a),
  };
  const resolved: string[] = [];
  const runner = {
    running: true,
    consumerGroup: {
      [FETCH_GUARD]: guard,
      resolveOffset: (o: { offset: string }) => resolved.push(o.offset),
    },
    instrumentationEmitter: { emit() {} },
    logger: { debug() {} },
    heartbeat: async () => {},
    autoCommitOffsetsIfNecessary: async () => {},
  };
  const markersOnly = {
    topic: 'in',
    partition: 2,
    fetchedOffset: '150',
    highWatermark: '152',
    messages: [],
    isEmptyDueToFiltering: () => true,
    isEmpty: () => true,
    offsetLag: () => '0',
    offsetLagLow: () => '0',
    firstOffset: () => '150',
    lastOffset: () => '151',
  };
  await Runner.prototype.handleBatch.call(runner, markersOnly);
  assert.deepEqual(asked, ['in:2@150']);
  assert.deepEqual(resolved, [], 'refused: not resolved');
  take = true;
  await Runner.prototype.handleBatch.call(runner, markersOnly);
  assert.deepEqual(resolved, ['151'], 'taken: kafkajs resolves it');

  // kafkajs's own OffsetManager, with Sluice's reset (kafkajs-offset-reset.ts): the log starts at 6.
  const offsetManager = new OffsetManager({
    cluster: {
      committedOffsets: () => ({}),
      fetchTopicsOffset: async () => [{ topic: 'in', partitions: [{ partition: 0, offset: '6' }] }],
    },
    memberAssignment: { in: [0] },
    topicConfigurations: { in: { fromBeginning: true } },
    instrumentationEmitter: { emit() {} },
    groupId: 'g',
    generationId: 1,
    memberId: 'm',
    autoCommit: false,
  });
  offsetManager.resolveOffset({ topic: 'in', partition: 0, offset: '2' });
  const group = {
    [FETCH_GUARD]: guard,
    // As kafkajs 2.2.4 keeps a fetch's preferred read replica.
    preferredReadReplicasPerTopicPartition: { in: { 1: { nodeId: 2, expireAt: Date.now() + 60_000 } } },
    logger: { error() {}, info() {} },
    offsetManager,
  };
  await ConsumerGroup.prototype.recoverFromOffsetOutOfRange.call(group, { topic: 'in', partition: 0 });
  assert.deepEqual(resets, [['in', 0, '6']]);
  assert.equal(String(offsetManager.nextOffset('in', 0)), '6', "kafkajs's next fetch starts there too");
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
    // As kafkajs: a seek is pending until the partition's next fetch takes it.
    seek: (s: { topic: string; partition: number; offset: string }) => {
      seeks.push(s);
      pending.add(`${s.topic}:${s.partition}`);
    },
    disconnect: async () => {},
  };
  const pending = new Set<string>();
  // kafkajs's consumer group as kafkajs-static.ts hands it over (its stale check, the guard set on it).
  const group: Record<string | symbol, unknown> = {
    hasSeekOffset: (tp: { topic: string; partition: number }) => pending.has(`${tp.topic}:${tp.partition}`),
  };
  const kafka = {
    consumer: (config: { onGroup(g: unknown): void }) => {
      config.onGroup(group);
      return consumer;
    },
  } as unknown as Kafka;
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
  const guard = () => group[FETCH_GUARD] as FetchGuard;
  /** A fetch of the partition (by any broker's fetcher) takes its pending seek. */
  const takeSeek = (partition: number) => pending.delete(`in:${partition}`);
  return { kafka, listeners, seeks, deliver, pending, guard, takeSeek };
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
  /** Resolves without asking isStale (an input-sync resolve of records taken before a seek). */
  let blind = false;
  await c.start({
    onAssignment() {},
    onBatch: async (b: BatchContext) => {
      if (!blind && b.isStale()) return;
      // Asked again (between slices): the same answer.
      if (!blind && b.isStale()) throw new Error('stale on the second ask only');
      processed.push(b.records.map((r) => r.offset));
      b.resolveOffset(b.records[b.records.length - 1]!.offset);
    },
    onFatal() {},
  } as never);
  try {
    const end = (lastOffset: string) =>
      f.listeners.get('end')!({
        payload: { topic: 'in', partition: 0, batchSize: 0, lastOffset, highWatermark: '1000' },
      });
    const lastSeek = () => f.seeks.at(-1)?.offset;
    // A task (re)starts: it seeks its partition to its committed offset, 100.
    c.seek('in', 0, '100');
    assert.equal(lastSeek(), '100');
    // kafkajs's own check: while the seek is pending, a batch is stale.
    assert.deepEqual(await f.deliver(0, '150', ['150', '151']), []);
    // Another fetcher took the seek; the old fetch's answer comes after it.
    f.takeSeek(0);
    assert.deepEqual(await f.deliver(0, '150', ['150', '151']), [], 'not resolved');
    assert.deepEqual(processed, [], 'not processed');
    assert.equal(f.seeks.length, 2);
    assert.equal(lastSeek(), '100', 'sought back');
    assert.equal(warnings.length, 1);
    // The fetch from the position is processed (asked twice, the same answer), and so is the next.
    f.takeSeek(0);
    assert.deepEqual(await f.deliver(0, '100', ['100', '101']), ['101']);
    assert.deepEqual(await f.deliver(0, '102', ['102']), ['102']);
    // A batch of a transaction's marker only, which kafkajs resolves itself.
    end('103');
    assert.deepEqual(await f.deliver(0, '104', ['105']), ['105']);
    // A transaction's last record and its marker: kafkajs resolves the marker with the record.
    assert.deepEqual(await f.deliver(0, '106', ['106'], '107'), ['106']);
    assert.deepEqual(await f.deliver(0, '108', ['108']), ['108']);
    assert.deepEqual(processed, [['100', '101'], ['102'], ['105'], ['106'], ['108']]);
    assert.equal(f.seeks.length, 2);

    // A batch of markers only that kafkajs would resolve itself: refused while the seek is
    // pending; fetched before it (the seek taken by another fetcher), refused and sought back.
    c.seek('in', 0, '100');
    assert.equal(f.guard().takeSkipped('in', 0, '109'), false);
    assert.equal(f.seeks.length, 3);
    f.takeSeek(0);
    assert.equal(f.guard().takeSkipped('in', 0, '109'), false);
    assert.equal(f.seeks.length, 4);
    assert.equal(lastSeek(), '100');
    f.takeSeek(0);
    assert.equal(f.guard().takeSkipped('in', 0, '100'), true);
    end('100');

    // An out-of-range position kafkajs moved to the log's start: the fetch from there is taken.
    f.guard().reset('in', 0, '300');
    assert.deepEqual(await f.deliver(0, '300', ['300']), ['300']);
    assert.equal(f.seeks.length, 4);

    // While a seek is pending, neither a reset nor a resolve (an input-sync resolve of records
    // taken before the seek) moves the position: the fetch starts where the seek says.
    c.seek('in', 0, '250');
    f.guard().reset('in', 0, '10');
    blind = true;
    assert.deepEqual(await f.deliver(0, '290', ['290']), ['290']);
    blind = false;
    end('295');
    f.takeSeek(0);
    assert.deepEqual(await f.deliver(0, '260', ['260']), [], 'beyond 250: dropped');
    assert.equal(lastSeek(), '250');
    f.takeSeek(0);
    assert.deepEqual(await f.deliver(0, '250', ['250']), ['250']);

    // A restarted consumer forgets the positions: the next batch is taken wherever it starts.
    f.listeners.get('crash')!({ payload: { error: new Error('x'), restart: true } });
    assert.deepEqual(await f.deliver(0, '400', ['400']), ['400']);
  } finally {
    await c.stop();
  }
});
