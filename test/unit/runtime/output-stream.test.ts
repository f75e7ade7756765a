import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TopicRecords, WrittenOffsets } from '../../../src/kafka/producer.js';
import { OutputStream } from '../../../src/runtime/output-stream.js';
import { TaskProgress } from '../../../src/runtime/task-progress.js';

const tick = () => new Promise((r) => setImmediate(r));

/** A stream whose sends wait until the test answers them (in order, or fails one). */
function world() {
  const progress = new TaskProgress({ maxOutOfOrdernessMs: 0, idleTimeoutMs: 0, idleAdvanceMs: 0 });
  const sends: Array<{ values: string[]; answer: (e?: Error) => void }> = [];
  const counted: string[] = [];
  const values = (r: TopicRecords) => [...r.values()].flat().map((m) => String(m.value));
  const stream = new OutputStream({
    send: (records) =>
      new Promise<WrittenOffsets>((resolve, reject) => {
        sends.push({ values: values(records), answer: (e) => (e ? reject(e) : resolve(new Map())) });
      }),
    sent: (outputs) => counted.push(...values(outputs)),
    progress,
  });
  const emit = (v: string) => progress.collector.emit('out', null, Buffer.from(v), 0, undefined);
  return { progress, stream, sends, counted, emit };
}

test('outputs go as their batch ends, one send at a time; what collects meanwhile goes in one send after it', async () => {
  const w = world();
  w.emit('a');
  w.stream.flush();
  await tick();
  assert.deepEqual(
    w.sends.map((s) => s.values),
    [['a']],
  );
  assert.equal(w.progress.collector.count, 0);
  w.emit('b');
  w.stream.flush(); // a send is in flight: b waits
  w.emit('c');
  w.stream.flush();
  await tick();
  assert.equal(w.sends.length, 1);
  w.sends[0]!.answer();
  await tick();
  await tick();
  assert.deepEqual(
    w.sends.map((s) => s.values),
    [['a'], ['b', 'c']],
  );
  assert.deepEqual(w.counted, ['a']);
  // The checkpoint's send queues behind the early one and is answered after it.
  const cp = w.stream.push(
    new Map([
      ['out', []],
      ['changelog', []],
    ]),
    new Map(),
  );
  await tick();
  assert.equal(w.sends.length, 2, 'not sent before the one in flight is answered');
  w.sends[1]!.answer();
  await tick();
  await tick();
  assert.equal(w.sends.length, 3);
  w.sends[2]!.answer();
  await cp;
  assert.deepEqual(w.counted, ['a', 'b', 'c']);
  assert.equal(w.stream.busy, false);
});

test('a failed send fails the checkpoint after it; after a reset the stream sends again', async () => {
  const w = world();
  w.emit('a');
  w.stream.flush();
  const cp = w.stream.push(new Map([['out', []]]));
  await tick();
  w.sends[0]!.answer(new Error('NOT_ENOUGH_REPLICAS'));
  await assert.rejects(cp, /NOT_ENOUGH_REPLICAS/);
  assert.equal(w.sends.length, 1, "the checkpoint's records were not sent");
  // The same run stays failed until the task resets (which clears its progress).
  await assert.rejects(w.stream.push(new Map()), /NOT_ENOUGH_REPLICAS/);
  w.progress.clear();
  const again = w.stream.push(new Map([['out', []]]));
  await tick();
  assert.equal(w.sends.length, 2);
  w.sends[1]!.answer();
  await again;
});
