import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BatchContext } from '../../../src/kafka/consumer.js';
import type { InRecord } from '../../../src/kafka/types.js';
import { processInSlices, sinceTurn } from '../../../src/runtime/batch-slices.js';
import { SLICE_MS, SliceSize } from '../../../src/runtime/slice-size.js';
import type { Task } from '../../../src/runtime/task.js';

/**
 * kafkajs hands a fetch's batches (one per partition) to their handlers in promise continuations,
 * without the event loop turning between them. A batch small enough for one slice used to be
 * processed at once, so the batches of a fetch held the event loop together: checkpoint answers
 * and timers waited for all of them (issue 19). Now a slice lets the loop run first when none was
 * released for more than a slice, and the waiting slices go one per turn of the loop.
 */
const busy = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end) {}
};

function fakeTask(name: string, order: string[]): Task {
  return {
    state: 'running',
    stateStore: undefined,
    sub: undefined,
    async: { chunk: 0, backlogged: false },
    checkpointDue: false,
    checkpointBacklogged: false,
    positionOf: () => undefined,
    process: (_topic: string, records: InRecord[]) => {
      order.push(name);
      // A slice's worth of work, during which a timer falls due.
      setTimeout(() => order.push(`timer after ${name}`), 0);
      busy(SLICE_MS + 2);
      return records.length;
    },
  } as unknown as Task;
}

const batch = (topic: string): BatchContext =>
  ({
    topic,
    partition: 0,
    records: [{ offset: '0' }, { offset: '1' }] as unknown as InRecord[],
    highWatermark: '2',
    isStale: () => false,
    resolveOffset: () => undefined,
    heartbeat: async () => undefined,
  }) as unknown as BatchContext;

const hooks = () => ({
  sizer: new SliceSize(),
  owns: () => true,
  checkpoint: () => undefined,
  awaitRoom: async () => undefined,
  awaitIdle: async () => undefined,
});

test('batches that each fit in one slice take turns with the event loop, one slice per turn', async () => {
  const order: string[] = [];
  busy(SLICE_MS + 1); // the loop last turned more than a slice ago
  assert.ok(sinceTurn() >= SLICE_MS);
  // Three partitions' batches handed over together, as kafkajs does.
  const done = Promise.all(
    ['a', 'b', 'c'].map((p) => processInSlices(fakeTask(p, order), batch(p), () => true, hooks())),
  );
  assert.deepEqual(order, [], 'nothing ran before the loop turned');
  assert.deepEqual(await done, [2, 2, 2]);
  await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(order, ['a', 'timer after a', 'b', 'timer after b', 'c', 'timer after c']);
});

test('a batch within a slice of the last release is processed at once', async () => {
  const order: string[] = [];
  const cheap = (name: string) =>
    ({
      ...fakeTask(name, order),
      process: (_t: string, records: InRecord[]) => {
        order.push(name);
        return records.length;
      },
    }) as unknown as Task;
  // Whether y may skip the wait depends on the clock (a slice since the last release): tried until
  // this process was not held up between x's release and y's start, which it rarely is.
  let tried = 0;
  for (; tried < 20; tried++) {
    order.length = 0;
    busy(SLICE_MS + 1);
    await processInSlices(cheap('x'), batch('x'), () => true, hooks()); // waited for a release
    if (sinceTurn() >= SLICE_MS) continue;
    const y = processInSlices(cheap('y'), batch('y'), () => true, hooks());
    // Held up between the check above and y's own (a shared machine): the clock passed a slice.
    if (order.length === 1 && sinceTurn() >= SLICE_MS) {
      await y;
      continue;
    }
    assert.deepEqual(order, ['x', 'y'], 'y ran synchronously: a slice was released less than a slice ago');
    assert.equal(await y, 2);
    break;
  }
  assert.ok(tried < 20, 'never less than a slice after a release');
});

test('a checkpoint due when a batch waits for its turn starts after its first slice, not before', async () => {
  const order: string[] = [];
  const task = { ...fakeTask('z', order), checkpointDue: true } as unknown as Task;
  const h = { ...hooks(), checkpoint: () => order.push('checkpoint') };
  busy(SLICE_MS + 1);
  await processInSlices(task, batch('z'), () => true, h);
  // The caller (the worker's batch handler) starts it after the batch, with the batch's records.
  assert.deepEqual(order.slice(0, 1), ['z']);
  assert.ok(!order.includes('checkpoint'));
});

test('a checkpoint due while a batch is processed in several slices starts after the first one', async () => {
  const order: string[] = [];
  const task = {
    ...fakeTask('s', order),
    checkpointDue: true,
    async: { chunk: 1, backlogged: false }, // one record per slice
  } as unknown as Task;
  const h = { ...hooks(), checkpoint: () => order.push('checkpoint') };
  busy(SLICE_MS + 1);
  assert.equal(await processInSlices(task, batch('s'), () => true, h), 2);
  assert.deepEqual(
    order.filter((x) => !x.startsWith('timer')),
    ['s', 'checkpoint', 's'],
  );
});
