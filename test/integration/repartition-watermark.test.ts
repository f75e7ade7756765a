import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import kafkajs from 'kafkajs';
import {
  createTopics,
  deleteTopicsMatching,
  eventually,
  produce,
  readAll,
  type TestRecord,
  uniqueName,
  withAdmin,
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
  assert.deepEqual(windowCounts(out), reference, 'every window once, with every order of it counted');
});

/** The job's window results by `key|start` (the flush keys' left out); a window twice fails. */
function windowCounts(out: ReadonlyArray<{ key: string | null; value: string | null }>): Map<string, number> {
  const got = new Map<string, number>();
  for (const r of out) {
    if (r.key!.startsWith('flush')) continue;
    const v = JSON.parse(r.value!) as { start: number; value: number };
    const wid = `${r.key}|${v.start}`;
    assert.ok(!got.has(wid), `window ${wid} emitted twice`);
    got.set(wid, v.value);
  }
  return got;
}

const BACKFILL_ORDERS = 4000;

/**
 * A backfill: event times from 1970, re-keyed through a repartition topic. Records there carry
 * their event time, so under the broker's default time retention (7 days) each segment the writer
 * rolled was deleted at the broker's next retention check, before the reading task got to it (seen
 * in CI with a test's 1970 timestamps on an output topic: the first slice's results vanished).
 * The repartition topic is created without time retention, and what the app committed past is
 * deleted by the worker instead (Kafka Streams' repartition purge).
 */
test('a keyBy should create its repartition topic without time retention, and delete what the app committed past', {
  timeout: 180_000,
}, async (t) => {
  const id = uniqueName('t-rpurge');
  const topic = (n: string) => `${id}-${n}`;
  await createTopics(['orders', 'counts', 'late'].map((n) => ({ topic: topic(n), partitions: PARTITIONS })));
  const orders: TestRecord[] = [];
  const reference = new Map<string, number>();
  for (let i = 0; i < BACKFILL_ORDERS; i++) {
    const ts = 1_000 + i * 250; // 1970, in order: about 17 minutes of event time
    const k = `k${i % 7}`;
    orders.push({ key: `o${i}`, value: JSON.stringify({ k, t: ts, i }), partition: i % PARTITIONS });
    const w = `${k}|${Math.floor(ts / MINUTE) * MINUTE}`;
    reference.set(w, (reference.get(w) ?? 0) + 1);
  }
  for (let p = 0; p < PARTITIONS; p++)
    orders.push({
      key: `flush${p}`,
      value: JSON.stringify({ k: `flush${p}`, t: 100 * MINUTE, i: -1 }),
      partition: p,
    });

  const env = { TEST_APP_ID: id, SLUICE_PROCESSING_REPARTITION_PURGE_INTERVAL_MS: '300' };
  const w = spawnWorker('keyby-window', {
    name: 'rpurge',
    stateDir: mkdtempSync(join(tmpdir(), 'sluice-rp-')),
    env,
  });
  t.after(async () => {
    await w.kill('SIGKILL');
    await deleteTopicsMatching(id);
  });
  await produce(topic('orders'), orders);
  const out = await readAll(topic('counts'), {
    expected: reference.size,
    timeoutMs: 120_000,
    settleMs: 2000,
  });
  assert.deepEqual(windowCounts(out), reference, 'every window once, with every order of it counted');

  const repartition = `${id}-by-k-repartition`;
  const configs = await withAdmin((a) =>
    a.describeConfigs({
      includeSynonyms: false,
      resources: [
        { type: kafkajs.ConfigResourceTypes.TOPIC, name: repartition, configNames: ['retention.ms'] },
      ],
    }),
  );
  const retention = configs.resources[0]!.configEntries.find((e) => e.configName === 'retention.ms');
  assert.equal(retention?.configValue, '-1', 'the repartition topic has no time retention');

  // Everything went through and was committed: the purge deletes up to the committed offsets.
  await eventually(
    async () => {
      const [low, committed] = await withAdmin(
        async (a) =>
          [
            await a.fetchTopicOffsets(repartition),
            await a.fetchOffsets({ groupId: id, topics: [repartition] }),
          ] as const,
      );
      const at = new Map(committed[0]!.partitions.map((p) => [p.partition, p.offset]));
      const written = low.reduce((n, p) => n + Number(p.high), 0);
      return (
        written >= BACKFILL_ORDERS && low.every((p) => Number(p.low) > 0 && p.low === at.get(p.partition))
      );
    },
    { what: 'every repartition partition purged up to its committed offset', timeoutMs: 30_000 },
  );
});
