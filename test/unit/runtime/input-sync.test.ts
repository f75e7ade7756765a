import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { InRecord } from '../../../src/kafka/types.js';
import { InputSync, type InputSyncOptions, type SyncedTask } from '../../../src/runtime/input-sync.js';
import type { SubTopology } from '../../../src/topology/build.js';

/** A task reading `s` (a stream) and `t` (a table): records what it is handed, in order. */
function fakeTask() {
  const seen: string[] = [];
  const next = new Map<string, bigint | undefined>([
    ['s', 0n],
    ['t', 0n],
  ]);
  const sub = {
    sourceTopics: ['s', 't'],
    sources: new Map([
      ['s', { spec: { kind: 'source', table: false } }],
      ['t', { spec: { kind: 'source', table: true } }],
    ]),
  } as unknown as SubTopology;
  const task: SyncedTask & { seen: string[]; next: typeof next } = {
    sub,
    partition: 0,
    state: 'running',
    seen,
    next,
    positionOf: (topic) => next.get(topic),
    process(topic, records) {
      for (const r of records) seen.push(`${topic}${r.offset}@${r.timestamp}`);
      next.set(topic, BigInt(records[records.length - 1]!.offset) + 1n);
      return records.length;
    },
  };
  return task;
}

const recs = (from: number, ts: number[]): InRecord[] =>
  ts.map((t, i) => ({ key: null, value: Buffer.alloc(10), offset: String(from + i), timestamp: String(t) }));

function sync(task: SyncedTask, over: Partial<InputSyncOptions> = {}) {
  const calls: string[] = [];
  const s = new InputSync(
    task,
    {
      maxTaskIdleMs: 1000,
      maxBufferedBytes: 1_000_000,
      pause: (t) => calls.push(`pause ${t}`),
      resume: (t) => calls.push(`resume ${t}`),
      processed: () => undefined,
      ...over,
    },
    0,
  );
  const batch = (topic: string, records: InRecord[], high: number) => ({
    topic,
    records,
    highWatermark: String(high),
    fetchedTo: records[records.length - 1]!.offset,
    resolveOffset: (o: string) => calls.push(`resolve ${topic} ${o}`),
  });
  return { s, calls, batch };
}

test('records of several inputs should be processed in timestamp order, a table before a stream at equal times', () => {
  const task = fakeTask();
  const { s, batch } = sync(task);
  s.add(batch('s', recs(0, [10, 20, 30]), 10), 0);
  assert.deepEqual(task.seen, [], 'the table has not been fetched yet: the stream waits');
  s.add(batch('t', recs(0, [5, 20, 25]), 3), 10);
  assert.deepEqual(
    task.seen,
    ['t0@5', 's0@10', 't1@20', 's1@20', 't2@25', 's2@30'],
    'the table at its end holds nothing back',
  );
  s.add(batch('t', recs(3, [35]), 4), 20);
  assert.deepEqual(task.seen.slice(6), [], 'the stream has more in Kafka: the table waits for it');
  s.add(batch('s', recs(3, [40]), 4), 30);
  assert.deepEqual(task.seen.slice(6), ['t3@35', 's3@40']);
});

test('an input with nothing buffered should hold the others for maxTaskIdleMs at most, and not at all when caught up', () => {
  const task = fakeTask();
  const { s, batch } = sync(task);
  s.add(batch('s', recs(0, [10, 20]), 10), 0);
  s.drain(999);
  assert.deepEqual(task.seen, []);
  s.drain(1000);
  assert.deepEqual(task.seen, ['s0@10', 's1@20'], 'the table waited long enough');
  const t2 = fakeTask();
  const b = sync(t2);
  b.s.add(b.batch('t', recs(0, [1]), 1), 0);
  b.s.add(b.batch('s', recs(0, [10, 20]), 10), 0);
  assert.deepEqual(t2.seen, ['t0@1', 's0@10', 's1@20'], 'a table at its end holds nothing back');
});

test('a partition with a full buffer should be paused and resumed once drained; offsets resolved as buffered', () => {
  const task = fakeTask();
  const { s, calls, batch } = sync(task, { maxBufferedBytes: 140 });
  s.add(batch('s', recs(0, [10, 20]), 10), 0);
  assert.deepEqual(calls, ['pause s', 'resolve s 1']);
  s.add(batch('t', recs(0, [1]), 1), 0);
  assert.deepEqual(calls.slice(2), ['resolve t 0', 'resume s']);
  assert.equal(task.seen.length, 3);
});

test('a buffer should be dropped when the task went back to an earlier position (a reset), and re-fetched records skipped', () => {
  const task = fakeTask();
  const { s, batch } = sync(task);
  s.add(batch('t', recs(0, [1]), 1), 0);
  s.add(batch('s', recs(0, [10]), 5), 0);
  s.add(batch('s', recs(1, [11, 12, 13]), 5), 0);
  s.add(batch('s', recs(1, [11, 12, 13]), 5), 0); // a re-fetch of the same records
  assert.deepEqual(s.buffered(), { s: 0, t: 0 });
  assert.equal(task.seen.filter((x) => x.startsWith('s')).length, 4, 'each record once');
  // A reset: the task goes back to offset 2 of s; the buffer is dropped, the re-fetch processed.
  task.next.set('s', 2n);
  s.add(batch('s', recs(2, [12, 13]), 5), 0);
  assert.deepEqual(task.seen.slice(-2), ['s2@12', 's3@13']);
});

test('a long interleaving should come out in timestamp order, each record once (an input that never runs dry)', () => {
  const task = fakeTask();
  const { s, batch } = sync(task);
  const N = 20_000;
  // s at even times, t at odd ones, in batches of 5000 and 3000: neither runs dry until the end.
  const evens = recs(
    0,
    Array.from({ length: N }, (_, i) => 2 * i),
  );
  const odds = recs(
    0,
    Array.from({ length: N }, (_, i) => 2 * i + 1),
  );
  let si = 0;
  let ti = 0;
  while (si < N || ti < N) {
    if (si < N) s.add(batch('s', evens.slice(si, (si += 5000)), N), 0);
    if (ti < N) s.add(batch('t', odds.slice(ti, (ti += 3000)), N), 0);
  }
  const times = task.seen.map((x) => Number(x.split('@')[1]));
  assert.equal(times.length, 2 * N);
  assert.ok(
    times.every((t, i) => i === 0 || t > times[i - 1]!),
    'strictly rising times',
  );
});
