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
import { spawnWorker } from '../helpers/workers.js';

const PARTITIONS = 2;
const ORDERS = 4000;
const MINUTE = 60_000;

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
  for (let i = 0; i < ORDERS; i++) {
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
  const got = new Map<string, number>();
  for (const r of out) {
    if (r.key!.startsWith('flush')) continue;
    const v = JSON.parse(r.value!) as { start: number; value: number };
    got.set(`${r.key}|${v.start}`, v.value);
  }
  assert.deepEqual(got, reference, 'every window once, with every order of it counted');

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
      return written >= ORDERS && low.every((p) => Number(p.low) > 0 && p.low === at.get(p.partition));
    },
    { what: 'every repartition partition purged up to its committed offset', timeoutMs: 30_000 },
  );
});
