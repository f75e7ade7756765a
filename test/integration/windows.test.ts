import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  createTopics,
  deleteTopicsMatching,
  jobTopics,
  produce,
  readAll,
  type TestRecord,
} from '../helpers/kafka.js';
import {
  checkLateAndRetention,
  checkWindowOutputs,
  expectedOutputs,
  GRACE,
  OOO,
  reference,
  WINDOW_OUTPUTS,
  type WindowOutput,
  windowInput,
} from '../helpers/window-reference.js';
import { metricSum, spawnWorker } from '../helpers/workers.js';

test('windows should equal a reference for tumbling, hopping, sliding and session windows, with out-of-order and late records, grace to the millisecond and closed windows deleted', {
  timeout: 240_000,
}, async (t) => {
  const { id, input, env } = await jobTopics('t-win', 3);
  await createTopics(WINDOW_OUTPUTS.map((o) => ({ topic: `${id}-${o}`, partitions: 3 })));
  const { records, flushKeys } = windowInput();
  const ref = reference(records);

  const w = spawnWorker('windows', {
    name: 'win',
    env: { ...env, TEST_GRACE: String(GRACE), SLUICE_PROCESSING_MAX_OUT_OF_ORDERNESS_MS: String(OOO) },
  });
  t.after(async () => {
    await w.kill('SIGKILL');
    await deleteTopicsMatching(id);
  });
  const toSend: TestRecord[] = records.map((r) => ({
    key: r.k,
    value: JSON.stringify({ k: r.k, v: r.v, t: r.t }),
    partition: r.p,
  }));
  await produce(input, toSend, 500);

  const expected = expectedOutputs(ref, flushKeys);
  const outs = {} as Record<WindowOutput, Awaited<ReturnType<typeof readAll>>>;
  try {
    for (const o of WINDOW_OUTPUTS)
      outs[o] = await readAll(`${id}-${o}`, { expected: expected[o], timeoutMs: 90_000 });
    checkWindowOutputs(ref, flushKeys, outs);

    const changelog = await readAll(`${id}-tumbling-w-changelog`, { settleMs: 2000, timeoutMs: 30_000 });
    checkLateAndRetention(ref, flushKeys, await w.metrics(), changelog);
  } catch (e) {
    // Lateness here depends only on each partition's record order: say what the worker went through.
    console.error(
      `--- ${w.name} ---\n${w.logs
        .filter((l) => !l.includes('"level":10'))
        .slice(-80)
        .join('\n')}`,
    );
    throw e;
  }
});

test('processing-time windows should follow the wall clock, not the records’ timestamps', {
  timeout: 120_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-ptime', 1);
  const w = spawnWorker('processing-time', { name: 'ptime', env });
  t.after(async () => {
    await w.kill('SIGKILL');
    await deleteTopicsMatching(id);
  });
  await w.url();
  const before = Date.now();
  // Kafka timestamps from 1970: as event time every one would be in a long-closed window.
  const old = (n: number): TestRecord[] =>
    Array.from({ length: n }, (_, i) => ({ key: 'k', value: `r${i}`, timestamp: String(1000 + i) }));
  await produce(input, old(50));
  await new Promise((r) => setTimeout(r, 2500));
  await produce(input, old(1)); // moves the (wall-clock) watermark past the first window
  const out = await readAll(output, { expected: 1 });
  const results = out.map((r) => JSON.parse(r.value!));
  assert.ok(results.length >= 1);
  for (const r of results)
    assert.ok(r.start >= before - 1000 && r.start <= Date.now(), `window ${r.start} is by the clock`);
  assert.equal(
    results.reduce((a, r) => a + r.value, 0),
    50,
    'the first 50 records counted in closed wall-clock windows',
  );
  assert.equal(metricSum(await w.metrics(), 'sluice_late_records_total'), 0);
});
