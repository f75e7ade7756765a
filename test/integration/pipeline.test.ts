import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { App, json, loadConfig, startWorker, string } from 'sluice';
import { deleteTopicsMatching, eventually, jobTopics, produce, readAll } from '../helpers/kafka.js';
import { metricSum, metricValue, spawnWorker } from '../helpers/workers.js';

interface In {
  k: string;
  seq: number;
  drop?: boolean;
}

function inputs(n: number, keys: number) {
  return Array.from({ length: n }, (_, i) => {
    const k = `k${i % keys}`;
    const v: In = { k, seq: i };
    if (i % 10 === 3) v.drop = true;
    return { key: k, value: JSON.stringify(v) };
  });
}

test('stateless pipeline should write exactly the transformed records, in order per key, and count them in /metrics', async (t) => {
  const { id, input, output } = await jobTopics('t-pipe', 4);
  t.after(() => deleteTopicsMatching(id));
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
  t.after(() => w.stop());

  const expected = N - N / 10;
  const out = await readAll(output, { expected, timeoutMs: 60_000 });
  assert.equal(out.length, expected, 'every kept record once, none twice');
  const seen = new Set<number>();
  const lastSeqOfKey = new Map<string, number>();
  for (const r of out) {
    const v = JSON.parse(r.value!);
    assert.equal(v.doubled, v.seq * 2);
    assert.ok(!v.drop, 'filtered records must not appear');
    assert.ok(!seen.has(v.seq), `duplicate seq ${v.seq}`);
    seen.add(v.seq);
    assert.equal(r.key, v.k, 'key kept');
    const prev = lastSeqOfKey.get(r.key!) ?? -1;
    assert.ok(v.seq > prev, `order per key broken for ${r.key}: ${v.seq} after ${prev}`);
    lastSeqOfKey.set(r.key!, v.seq);
  }

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
  t.after(() => deleteTopicsMatching(id));
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
  t.after(() => w.stop());
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

test('two worker processes in one group should split the partitions and both write output', async (t) => {
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
  await produce(
    input,
    inputs(N, 101).map((r) => ({ ...r, value: r.value.replace('"drop":true', '"drop":false') })),
  );
  const out = await readAll(output, { expected: N, timeoutMs: 60_000 });
  assert.equal(out.length, N);
  assert.equal(new Set(out.map((r) => JSON.parse(r.value!).seq)).size, N, 'no duplicates');
  const [ma, mb] = await Promise.all([a.metrics(), b.metrics()]);
  const outA = metricSum(ma, 'sluice_records_out_total', { topic: output });
  const outB = metricSum(mb, 'sluice_records_out_total', { topic: output });
  assert.ok(outA > 0 && outB > 0, `both contribute (a=${outA}, b=${outB})`);
  assert.equal(outA + outB, N);
  assert.equal(await a.kill('SIGTERM'), 0, 'graceful exit on SIGTERM');
  assert.equal(await b.kill('SIGTERM'), 0);
});
