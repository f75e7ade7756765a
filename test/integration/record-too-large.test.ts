import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DLQ_HEADERS } from '../../src/runtime/dead-letter.js';
import { createTopics, deleteTopicsMatching, produce, readAll, uniqueName } from '../helpers/kafka.js';
import { metricSum, spawnWorker } from '../helpers/workers.js';

/**
 * An output larger than its topic's `max.message.bytes` is the record's fault, not the
 * machine's: the record that made it goes to the dead-letter topic, the rest flow on, and no
 * checkpoint fails on it. Before, every checkpoint carried the output, the broker refused it
 * (MESSAGE_TOO_LARGE), the task reset and made it again: the partition stood still for good.
 * A dead letter itself too large for the dead-letter topic goes without its value (the record
 * is at the source offset its headers name).
 */
test('an output too large for its topic should dead-letter its record, and a dead letter too large should go without its value', {
  timeout: 120_000,
}, async (t) => {
  const id = uniqueName('t-large');
  const input = `${id}-in`;
  const output = `${id}-out`;
  const limit = { 'max.message.bytes': '20000' };
  // The dead-letter topic made beforehand with the same bound: the worker leaves it as it is.
  await createTopics([
    { topic: input, partitions: 1 },
    { topic: output, partitions: 1, config: limit },
    { topic: `${id}-dlq`, partitions: 1, config: limit },
  ]);
  t.after(() => deleteTopicsMatching(id));
  const value = (seq: number) => {
    if (seq === 3) return { seq, grow: 30_000 }; // a small input, an output of 30 kB
    if (seq === 6) return { seq, grow: 30_000, pad: 'y'.repeat(25_000) }; // its dead letter is 25 kB too
    return { seq };
  };
  // Then 300 records of about 250 bytes out: more than 20 kB per checkpoint, which must go in
  // several batches (a Produce's batch of one partition is refused whole when over the bound).
  const more = Array.from({ length: 300 }, (_, i) => ({ seq: 10 + i, grow: 200 }));
  await produce(input, [
    ...Array.from({ length: 10 }, (_, seq) => ({ key: `k${seq}`, value: JSON.stringify(value(seq)) })),
    ...more.map((v) => ({ key: `k${v.seq}`, value: JSON.stringify(v) })),
  ]);
  const w = spawnWorker('dlq', {
    name: 'too-large',
    env: { TEST_APP_ID: id, TEST_INPUT: input, TEST_OUTPUT: output },
  });
  t.after(() => w.kill('SIGTERM'));

  const out = await readAll(output, { expected: 308, timeoutMs: 60_000 });
  assert.deepEqual(
    out.map((r) => JSON.parse(r.value!).seq),
    [0, 1, 2, 4, 5, 7, 8, 9, ...more.map((v) => v.seq)],
    'every other record out once, in order',
  );
  const dlq = await readAll(`${id}-dlq`, { expected: 2, timeoutMs: 30_000 });
  assert.equal(dlq.length, 2);
  const [d3, d6] = dlq;
  assert.equal(d3!.headers[DLQ_HEADERS.offset], '3');
  assert.equal(d3!.value, JSON.stringify(value(3)), 'the record as it came');
  assert.equal(d3!.headers[DLQ_HEADERS.errorClass], 'RecordTooLargeError');
  assert.match(
    d3!.headers[DLQ_HEADERS.errorMessage]!,
    new RegExp(`over the 20000 bytes topic ${output} takes`),
  );
  assert.equal(d3!.headers[DLQ_HEADERS.valueOmitted], undefined);
  assert.equal(d6!.headers[DLQ_HEADERS.offset], '6');
  assert.equal(d6!.value, null, 'a dead letter over the DLQ topic bound goes without its value');
  assert.equal(d6!.headers[DLQ_HEADERS.valueOmitted], String(JSON.stringify(value(6)).length));

  const metrics = await w.metrics();
  assert.equal(metricSum(metrics, 'sluice_records_dead_lettered_total'), 2);
  assert.equal(metricSum(metrics, 'sluice_checkpoint_failures_total'), 0, 'no checkpoint failed on them');
});
