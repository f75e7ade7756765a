import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DLQ_HEADERS } from '../../src/runtime/dead-letter.js';
import { fuzzSeed, rng } from '../helpers/fuzz.js';
import {
  deleteTopicsMatching,
  eventually,
  jobTopics,
  produce,
  readAll,
  withAdmin,
} from '../helpers/kafka.js';
import { type FuzzRecord, fuzzRecords, produceRaw, verifyDlqRun } from '../helpers/poison.js';
import { metricSum, spawnWorker } from '../helpers/workers.js';

const SEED = fuzzSeed(0xd1c_0008);
const TIMEOUT = { timeout: 180_000 };

test(
  'dead-letter fuzz: every good record out once, every poison record in the DLQ once with its headers',
  TIMEOUT,
  async (t) => {
    t.diagnostic(`seed ${SEED}`);
    const { id, input, output, env } = await jobTopics('t-dlqfuzz', 2);
    t.after(() => deleteTopicsMatching(id));
    const records = fuzzRecords(rng(SEED), 400, 2, 300_000);
    // Poison first in both partitions: it must not block what follows.
    records.unshift(
      {
        partition: 0,
        key: Buffer.from('k'),
        value: Buffer.from([0xff, 0xfe]),
        timestamp: String(Date.now()),
        fate: 'dlq-deserialize',
      },
      {
        partition: 1,
        key: Buffer.from('k'),
        value: Buffer.from('[]'),
        timestamp: String(Date.now()),
        fate: 'dlq-operator',
      },
    );
    await produceRaw(input, records);
    const w = spawnWorker('dlq', { name: 'dlq-fuzz', env });
    t.after(() => w.kill('SIGTERM'));
    const counts = await verifyDlqRun(id, input, output, records);
    t.diagnostic(`good ${counts.good}, poison ${counts.poison}, skipped ${counts.skipped}`);
    assert.ok(counts.poison > 50 && counts.skipped > 10, 'the mix has every kind');
    // The DLQ was written in transactions: each commit leaves a control marker in the partition,
    // so its log holds more offsets than the records a read_committed reader sees.
    const ends = await withAdmin((a) => a.fetchTopicOffsets(`${id}-dlq`));
    const offsets = ends.reduce((n, p) => n + Number(p.high) - Number(p.low), 0);
    assert.ok(
      offsets > counts.poison,
      `DLQ offsets ${offsets} should exceed its ${counts.poison} records (commit markers)`,
    );
    const m = await eventually(async () => {
      const text = await w.metrics();
      return metricSum(text, 'sluice_records_dead_lettered_total') >= counts.poison + counts.skipped
        ? text
        : '';
    });
    assert.equal(metricSum(m, 'sluice_records_dead_lettered_total'), counts.poison + counts.skipped);
    assert.equal(metricSum(m, 'sluice_records_in_total'), records.length);
    assert.equal(await w.kill('SIGTERM'), 0);
  },
);

test('per-operator policy should win over the app policy: app skip, validate fail', TIMEOUT, async (t) => {
  const { id, input, output, env } = await jobTopics('t-dlqpol1', 1);
  t.after(() => deleteTopicsMatching(id));
  await produce(input, [
    { key: 'a', value: JSON.stringify({ seq: 1 }) },
    { key: 'a', value: '{"seq": ' },
    { key: 'a', value: JSON.stringify({ seq: 2, skipMe: true }) },
    { key: 'a', value: JSON.stringify({ seq: 3 }) },
  ]);
  const w = spawnWorker('dlq', {
    name: 'pol1',
    env: { ...env, SLUICE_PROCESSING_ERROR_POLICY: 'skip', TEST_VALIDATE_ON_ERROR: 'fail' },
  });
  t.after(() => w.kill('SIGKILL'));
  const out = await readAll(output, { expected: 2 });
  assert.deepEqual(
    out.map((r) => JSON.parse(r.value!).seq),
    [1, 3],
    'the undecodable record is skipped (app policy)',
  );
  await produce(input, [{ key: 'a', value: '"not an object"' }]);
  const code = await Promise.race([w.exited, new Promise((r) => setTimeout(() => r('hung'), 60_000))]);
  assert.equal(code, 1, 'validate fails the worker');
  assert.match(w.logs.join('\n'), /failed \(operator in operator validate\): seq must be a number/);
  assert.equal(
    (await readAll(`${id}-dlq`, { timeoutMs: 3000 })).length,
    0,
    'nothing dead-lettered under skip/fail',
  );
});

test('per-operator policy should win over the app policy: app fail, validate dlq', TIMEOUT, async (t) => {
  const { id, input, output, env } = await jobTopics('t-dlqpol2', 1);
  t.after(() => deleteTopicsMatching(id));
  await produce(input, [
    { key: 'a', value: JSON.stringify({ seq: 1 }) },
    { key: 'a', value: 'null' },
    { key: 'a', value: JSON.stringify({ seq: 2, skipMe: true }) },
    { key: 'a', value: JSON.stringify({ seq: 3 }) },
  ]);
  const w = spawnWorker('dlq', {
    name: 'pol2',
    env: { ...env, SLUICE_PROCESSING_ERROR_POLICY: 'fail', TEST_VALIDATE_ON_ERROR: 'dlq' },
  });
  t.after(() => w.kill('SIGKILL'));
  const out = await readAll(output, { expected: 2 });
  assert.deepEqual(
    out.map((r) => JSON.parse(r.value!).seq),
    [1, 3],
  );
  const dlq = await readAll(`${id}-dlq`, { expected: 1 });
  assert.equal(dlq.length, 1);
  assert.equal(dlq[0]!.headers[DLQ_HEADERS.operator], 'validate');
  assert.equal(dlq[0]!.headers[DLQ_HEADERS.offset], '1');
  await produce(input, [{ key: 'a', value: '{"seq": ' }]);
  const code = await Promise.race([w.exited, new Promise((r) => setTimeout(() => r('hung'), 60_000))]);
  assert.equal(code, 1, 'an undecodable record fails the worker under the app policy');
  assert.match(w.logs.join('\n'), /failed \(deserialize\): invalid JSON/);
});

test(
  'huge poison records should reach the DLQ even when several fall into one checkpoint',
  TIMEOUT,
  async (t) => {
    const { id, input, output, env } = await jobTopics('t-dlqhuge', 1);
    t.after(() => deleteTopicsMatching(id));
    // Six ~300 KB undecodable records in a row: together far above the broker's 1 MB batch limit.
    const ts = String(Date.now());
    const records: FuzzRecord[] = [
      {
        partition: 0,
        key: Buffer.from('a'),
        value: Buffer.from(JSON.stringify({ seq: 0 })),
        timestamp: ts,
        fate: 'out',
        seq: 0,
      },
      ...Array.from(
        { length: 6 },
        (_, i): FuzzRecord => ({
          partition: 0,
          key: Buffer.from('a'),
          value: Buffer.from(`{"huge${i}":"${'z'.repeat(300_000)}`),
          timestamp: ts,
          fate: 'dlq-deserialize',
        }),
      ),
      {
        partition: 0,
        key: Buffer.from('a'),
        value: Buffer.from(JSON.stringify({ seq: 7 })),
        timestamp: ts,
        fate: 'out',
        seq: 7,
      },
    ];
    await produceRaw(input, records);
    const w = spawnWorker('dlq', {
      name: 'dlq-huge',
      env: { ...env, SLUICE_PROCESSING_COMMIT_INTERVAL_MS: '2000' },
    });
    t.after(() => w.kill('SIGTERM'));
    await verifyDlqRun(id, input, output, records, 60_000);
  },
);
