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

/**
 * The changelogs have a bound too. A checkpoint's changelog records go in record batches under
 * it (before, in batches of up to 500 KiB: a changelog with a smaller `max.message.bytes` refused
 * every checkpoint that wrote more than it takes, and the task reset forever). A single state
 * larger than its changelog takes cannot be written at all, and no record is left to blame at the
 * checkpoint (the value written is the key's last): the worker fails, naming the store and the
 * bound, as Kafka Streams' default production handler fails its thread.
 */
test('changelog records should go in batches under their topic bound; a state too large for it should fail the worker, naming the store', {
  timeout: 120_000,
}, async (t) => {
  const id = uniqueName('t-bigstate');
  const input = `${id}-in`;
  const output = `${id}-out`;
  const changelog = `${id}-keep-kept-changelog`;
  await createTopics([
    { topic: input, partitions: 1 },
    { topic: output, partitions: 1 },
    // Made beforehand with a 20 kB bound: the worker takes it as it is.
    {
      topic: changelog,
      partitions: 1,
      config: { 'max.message.bytes': '20000', 'cleanup.policy': 'compact' },
    },
  ]);
  t.after(() => deleteTopicsMatching(id));
  // 300 keys of 200-byte states: about 65 kB of changelog per checkpoint if they come in one.
  await produce(
    input,
    Array.from({ length: 300 }, (_, seq) => ({ key: `k${seq}`, value: JSON.stringify({ seq, grow: 200 }) })),
  );
  const w = spawnWorker('state-size', { env: { TEST_APP_ID: id, TEST_INPUT: input, TEST_OUTPUT: output } });
  t.after(() => w.kill('SIGTERM'));
  const out = await readAll(output, { expected: 300, timeoutMs: 60_000 });
  assert.deepEqual(
    out.map((r) => JSON.parse(r.value!).seq),
    Array.from({ length: 300 }, (_, i) => i),
  );
  const kept = await readAll(changelog, { expected: 300, timeoutMs: 30_000 });
  assert.equal(kept.length, 300, 'every state in the changelog');
  assert.equal(metricSum(await w.metrics(), 'sluice_checkpoint_failures_total'), 0, 'no checkpoint failed');

  // One state of 30 kB: the worker fails (exit 1) with the store and the bound named.
  await produce(input, [{ key: 'big', value: JSON.stringify({ seq: 300, grow: 30_000 }) }]);
  const code = await Promise.race([w.exited, new Promise((r) => setTimeout(() => r('running'), 30_000))]);
  assert.equal(code, 1, 'the worker exits 1');
  assert.ok(
    w.logs.some((l) =>
      new RegExp(
        `state store keep-kept: a state of 3000\\d bytes .* over the 20000 bytes its changelog ${changelog} takes`,
      ).test(l),
    ),
    w.logs.slice(-10).join('\n'),
  );
  assert.equal(
    (await readAll(output, { settleMs: 500, timeoutMs: 5_000 })).length,
    300,
    'its output not committed',
  );
});
