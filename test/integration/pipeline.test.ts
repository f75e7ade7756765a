import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { App, json, loadConfig, startWorker, string } from 'sluice';
import {
  deleteTopicsMatching,
  eventually,
  jobTopics,
  produce,
  type ReadRecord,
  readAll,
} from '../helpers/kafka.js';
import { metricSum, metricValue, spawnWorker } from '../helpers/workers.js';

interface In {
  k: string;
  seq: number;
  drop?: boolean;
  twice?: boolean;
}

/** Every 10th input (seq 3, 13, …) is dropped by the filter. */
const isDropped = (seq: number) => seq % 10 === 3;
/** Every 5th input (seq 1, 6, 11, …), when asked for, is written twice by the fixture's flatMap. */
const isTwice = (seq: number) => seq % 5 === 1;

/** `n` records over `keys` keys, seq 0…n-1 in this order, some marked `drop` and, if asked, `twice`. */
function inputs(n: number, keys: number, opts: { twice?: boolean } = {}) {
  return Array.from({ length: n }, (_, i) => {
    const k = `k${i % keys}`;
    const v: In = { k, seq: i };
    if (isDropped(i)) v.drop = true;
    if (opts.twice && isTwice(i)) v.twice = true;
    return { key: k, value: JSON.stringify(v) };
  });
}

/**
 * Asserts that the output keeps the input's order within each input partition, which `inputPartition`
 * reads from an output value (the job copies its `ctx.partition` there): seq never goes back, and the
 * copies of one seq follow each other in order. The producer wrote seq in order, so each input
 * partition holds it ascending. Keys are kept, and input and output have as many partitions and the
 * same key partitioner, so each input partition's output is one output partition, which `readAll`
 * returns in offset order.
 */
function assertOrderPerInputPartition(
  out: ReadRecord[],
  partitions: number,
  inputPartition: (v: any) => number,
): void {
  const last = new Map<number, { seq: number; copy: number }>();
  for (const r of out) {
    const v = JSON.parse(r.value!);
    const from = inputPartition(v);
    assert.equal(
      r.partition,
      from,
      `seq ${v.seq} from input partition ${from} is in output partition ${r.partition}`,
    );
    const at = { seq: v.seq as number, copy: (v.copy as number | undefined) ?? 0 };
    const prev = last.get(from);
    assert.ok(
      prev === undefined || at.seq > prev.seq || (at.seq === prev.seq && at.copy > prev.copy),
      `order of input partition ${from} broken: seq ${at.seq} (copy ${at.copy}) after seq ${prev?.seq} (copy ${prev?.copy})`,
    );
    last.set(from, at);
  }
  assert.deepEqual(
    [...last.keys()].sort((x, y) => x - y),
    Array.from({ length: partitions }, (_, p) => p),
    'every input partition has output (else the check proves little)',
  );
}

test('stateless pipeline should write exactly the transformed records, in order per key and per input partition, and count them in /metrics', async (t) => {
  const { id, input, output } = await jobTopics('t-pipe', 4);
  const N = 3000;
  await produce(input, inputs(N, 37));

  const app = new App({ id });
  app
    .stream(input, { key: string(), value: json<In>() })
    .filter((v) => !v.drop)
    .map((v, ctx) => ({ ...v, doubled: v.seq * 2, partition: ctx.partition }))
    .to(output);
  const config = loadConfig({
    env: { KAFKA_BROKERS: process.env.KAFKA_BROKERS },
    overrides: {
      http: { port: 0 },
      log: { level: 'warn', format: 'json' },
      state: { dir: mkdtempSync(join(tmpdir(), 'sluice-')) },
    },
  });
  const w = await startWorker(app, config);
  // Stop before deleting the topics: a worker whose topics vanish keeps a kafkajs retry alive.
  t.after(async () => {
    await w.stop();
    await deleteTopicsMatching(id);
  });

  const expected = N - N / 10;
  const out = await readAll(output, { expected, timeoutMs: 60_000 });
  assert.equal(out.length, expected, 'every kept record once, none twice');
  const seen = new Set<number>();
  const lastSeqOfKey = new Map<string, number>();
  for (const r of out) {
    const v = JSON.parse(r.value!);
    assert.equal(v.doubled, v.seq * 2);
    assert.ok(!isDropped(v.seq), 'filtered records must not appear');
    assert.ok(!seen.has(v.seq), `duplicate seq ${v.seq}`);
    seen.add(v.seq);
    assert.equal(r.key, v.k, 'key kept');
    const prev = lastSeqOfKey.get(r.key!) ?? -1;
    assert.ok(v.seq > prev, `order per key broken for ${r.key}: ${v.seq} after ${prev}`);
    lastSeqOfKey.set(r.key!, v.seq);
  }
  assertOrderPerInputPartition(out, 4, (v) => v.partition);

  const text: string = await eventually(
    async () => {
      const m = await (await fetch(`${w.http!.url}/metrics`)).text();
      return metricValue(m, 'sluice_records_out_total', { app: id, topic: output }) === expected ? m : '';
    },
    { what: 'records_out_total to reach the output count' },
  );
  assert.equal(metricValue(text, 'sluice_records_in_total', { app: id, topic: input }), N);
  assert.equal(metricValue(text, 'sluice_records_out_total', { app: id, topic: output }), expected);
  assert.ok((metricSum(text, 'sluice_checkpoints_total') ?? 0) > 0);
  const ready = await fetch(`${w.http!.url}/readyz`);
  assert.equal(ready.status, 200);
  assert.equal((await fetch(`${w.http!.url}/healthz`)).status, 200);
});

test('stateless pipeline should send a poison record to the dead-letter topic and go on', async (t) => {
  const { id, input, output } = await jobTopics('t-poison', 1);
  await produce(input, [
    { key: 'a', value: JSON.stringify({ k: 'a', seq: 1 }) },
    { key: 'a', value: '{"k": "a", "seq": ' },
    { key: 'a', value: JSON.stringify({ k: 'a', seq: 2 }) },
  ]);
  const app = new App({ id });
  app
    .stream(input, { key: string(), value: json<In>() })
    .map((v) => v.seq)
    .to(output);
  const config = loadConfig({
    env: { KAFKA_BROKERS: process.env.KAFKA_BROKERS },
    overrides: { http: { enabled: false }, log: { level: 'error', format: 'json' } },
  });
  const w = await startWorker(app, config);
  // Stop before deleting the topics: a worker whose topics vanish keeps a kafkajs retry alive.
  t.after(async () => {
    await w.stop();
    await deleteTopicsMatching(id);
  });
  const out = await readAll(output, { expected: 2 });
  assert.deepEqual(
    out.map((r) => r.value),
    ['1', '2'],
  );
  const dlq = await readAll(`${id}-dlq`, { expected: 1 });
  assert.equal(dlq.length, 1);
  assert.equal(dlq[0]!.value, '{"k": "a", "seq": ');
  assert.equal(dlq[0]!.headers['sluice.source.topic'], input);
  assert.equal(dlq[0]!.headers['sluice.source.offset'], '1');
  assert.equal(dlq[0]!.headers['sluice.error.class'], 'SerdeError');
});

test('two worker processes in one group should split the partitions and write every kept record, flatMap copies included, in order per input partition', async (t) => {
  const { id, input, output, env } = await jobTopics('t-group', 4);
  t.after(() => deleteTopicsMatching(id));
  const a = spawnWorker('stateless', { name: 'a', env });
  const b = spawnWorker('stateless', { name: 'b', env });
  t.after(async () => {
    await Promise.all([a.kill('SIGTERM'), b.kill('SIGTERM')]);
  });
  // Both members own tasks before any input arrives.
  await eventually(
    async () => {
      const [sa, sb] = await Promise.all([a.status(), b.status()]);
      return (
        sa.tasks.length === 2 &&
        sb.tasks.length === 2 &&
        sa.tasks.every((x: any) => x.state === 'running') &&
        sb.tasks.every((x: any) => x.state === 'running')
      );
    },
    { timeoutMs: 60_000, what: 'both workers to own two running tasks' },
  );
  const [sa, sb] = await Promise.all([a.status(), b.status()]);
  const owned = [...sa.tasks, ...sb.tasks].map((x: any) => x.id).sort();
  assert.deepEqual(owned, ['0_0', '0_1', '0_2', '0_3'], 'each partition owned by exactly one worker');

  const N = 2000;
  await produce(input, inputs(N, 101, { twice: true }));
  // The fixture's filter drops N/10, and its flatMap writes N/5 twice.
  const expected = N - N / 10 + N / 5;
  const out = await readAll(output, { expected, timeoutMs: 60_000 });
  assert.equal(out.length, expected, 'every kept record once, and the twice ones exactly twice');
  const copiesOfSeq = new Map<number, Array<number | undefined>>();
  for (const r of out) {
    const v = JSON.parse(r.value!);
    copiesOfSeq.set(v.seq, [...(copiesOfSeq.get(v.seq) ?? []), v.copy]);
  }
  for (let seq = 0; seq < N; seq++) {
    const want = isDropped(seq) ? undefined : isTwice(seq) ? [1, 2] : [undefined];
    assert.deepEqual(copiesOfSeq.get(seq), want, `copies of seq ${seq}`);
  }
  assertOrderPerInputPartition(out, 4, (v) => v.from);
  const [ma, mb] = await Promise.all([a.metrics(), b.metrics()]);
  const outA = metricSum(ma, 'sluice_records_out_total', { topic: output });
  const outB = metricSum(mb, 'sluice_records_out_total', { topic: output });
  assert.ok(outA > 0 && outB > 0, `both contribute (a=${outA}, b=${outB})`);
  assert.equal(outA + outB, expected, 'records out count the flatMap copies');
  const inA = metricSum(ma, 'sluice_records_in_total', { topic: input });
  const inB = metricSum(mb, 'sluice_records_in_total', { topic: input });
  assert.equal(inA + inB, N);
  assert.equal(await a.kill('SIGTERM'), 0, 'graceful exit on SIGTERM');
  assert.equal(await b.kill('SIGTERM'), 0);
});
