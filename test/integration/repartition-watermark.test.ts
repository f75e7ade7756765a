import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  createTopics,
  deleteTopicsMatching,
  eventually,
  produce,
  readAll,
  type TestRecord,
  uniqueName,
} from '../helpers/kafka.js';
import { rng } from '../helpers/running-sum.js';
import { metricSum, spawnWorker, type WorkerProcess } from '../helpers/workers.js';

const PARTITIONS = 2;
const PER_PARTITION = 3000;
const KEYS = 20;
const MINUTE = 60_000;

/**
 * Issue 13, item 10: lateness after a keyBy depends on event time, not on how fast each upstream
 * task catches up. Event times rise in order within every source partition (nothing is late in
 * event time), but partition 0 is produced and processed in full before partition 1 gets its first
 * record, and the worker is SIGKILLed and restarted halfway through partition 1. With the
 * watermark taken from the records of the repartition topic, partition 0's records had pushed it
 * past every window before partition 1's came, and all of those were late. With the upstream
 * tasks' watermarks carried through the repartition topic (the minimum over its writers), none is.
 */
test('a keyBy then a 1-minute window with 5 s grace should count no on-time record late when the upstream partitions catch up at very different speeds, through a SIGKILL', {
  timeout: 300_000,
}, async (t) => {
  const id = uniqueName('t-rwm');
  const topic = (n: string) => `${id}-${n}`;
  await createTopics(['orders', 'counts', 'late'].map((n) => ({ topic: topic(n), partitions: PARTITIONS })));
  const random = rng(10);
  const t0 = 1_700_000_000_000;
  const byPartition: TestRecord[][] = [];
  const reference = new Map<string, number>();
  let i = 0;
  for (let p = 0; p < PARTITIONS; p++) {
    const list: TestRecord[] = [];
    let ts = t0;
    for (let n = 0; n < PER_PARTITION; n++) {
      ts += Math.floor(random() * 200); // in order within the partition: 0–10 minutes of event time
      const k = `k${Math.floor(random() * KEYS)}`;
      list.push({ key: `o${i}`, value: JSON.stringify({ k, t: ts, i }), partition: p });
      const w = `${k}|${Math.floor(ts / MINUTE) * MINUTE}`;
      reference.set(w, (reference.get(w) ?? 0) + 1);
      i++;
    }
    byPartition.push(list);
  }
  // A far-future record per source partition closes every window of the input.
  const flush = Array.from({ length: PARTITIONS }, (_, p) => ({
    key: `flush${p}`,
    value: JSON.stringify({ k: `flush${p}`, t: t0 + 100 * MINUTE, i: -1 }),
    partition: p,
  }));

  const stateDir = mkdtempSync(join(tmpdir(), 'sluice-rwm-'));
  const env = { TEST_APP_ID: id };
  let w: WorkerProcess = spawnWorker('keyby-window', { name: 'rwm', stateDir, env });
  t.after(async () => {
    await w.kill('SIGKILL');
    await deleteTopicsMatching(id);
  });
  const repartition = `${id}-by-k-repartition`;
  const consumed = async (n: number) =>
    eventually(
      async () => metricSum(await w.metrics(), 'sluice_records_in_total', { topic: repartition }) >= n,
      { what: `${n} repartitioned records processed`, timeoutMs: 120_000 },
    );
  // Partition 0 in full, processed through the repartition topic, before partition 1 has anything.
  await produce(topic('orders'), byPartition[0]!);
  await consumed(PER_PARTITION);
  const half = Math.floor(PER_PARTITION / 2);
  await produce(topic('orders'), byPartition[1]!.slice(0, half));
  await new Promise((r) => setTimeout(r, 1500));
  await w.kill('SIGKILL');
  w = spawnWorker('keyby-window', { name: 'rwm2', stateDir, env });
  await produce(topic('orders'), byPartition[1]!.slice(half));
  await produce(topic('orders'), flush);

  const out = await readAll(topic('counts'), {
    expected: reference.size,
    timeoutMs: 180_000,
    settleMs: 3000,
  });
  const late = await readAll(topic('late'), { settleMs: 1000, timeoutMs: 10_000 });
  assert.equal(late.length, 0, `on-time orders sent to the late side output (of ${i})`);
  assert.equal(metricSum(await w.metrics(), 'sluice_late_records_total'), 0, 'late records counted');
  const got = new Map<string, number>();
  for (const r of out) {
    if (r.key!.startsWith('flush')) continue;
    const v = JSON.parse(r.value!) as { start: number; value: number };
    const wid = `${r.key}|${v.start}`;
    assert.ok(!got.has(wid), `window ${wid} emitted twice`);
    got.set(wid, v.value);
  }
  assert.deepEqual(got, reference, 'every window once, with every order of it counted');
});
