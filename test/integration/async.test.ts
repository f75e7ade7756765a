import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { readCommittedWithJava } from '../../bench/java-reader.js';
import { startEnrichService } from '../helpers/enrich-service.js';
import { brokers, jobTopics, produce, type ReadRecord, withAdmin } from '../helpers/kafka.js';
import { assertExactRunningSums, RunningSumInput, rng } from '../helpers/running-sum.js';
import { metricValue, spawnWorker, type WorkerProcess, workerGroup } from '../helpers/workers.js';

/**
 * Async operators against a real broker, real worker processes and a real local HTTP service
 * (test/helpers/enrich-service.ts): the job (test/fixtures/jobs/async-enrich.ts) enriches each
 * record with an HTTP call (mapAsync, per-key order) and sums it per key. Read by Kafka's own
 * console consumer (read_committed), the output must hold every running sum exactly once, in
 * order, each with the service's tag for its record: records in flight when a worker is killed
 * are run again after recovery, never lost, never applied twice.
 */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const N = Number(process.env.TEST_ASYNC_RECORDS ?? 24_000);
const KILLS = Number(process.env.TEST_ASYNC_KILLS ?? 4);

async function readJava(topic: string): Promise<ReadRecord[]> {
  const java = await readCommittedWithJava(brokers().join(','), topic, { withValues: true });
  return java.map((r) => ({
    key: null,
    value: r.value,
    partition: r.partition,
    offset: String(r.offset),
    headers: r.headers,
  }));
}

function assertTags(out: ReadRecord[]): void {
  for (const r of out) {
    const v = JSON.parse(r.value!) as { k: string; seq: number; tag: string };
    assert.equal(v.tag, `${v.k}:${v.seq}`, 'each output carries its own record’s enrichment');
  }
}

test('mapAsync should enrich every record exactly once, in per-key order, through SIGKILLs and a SIGSTOP of 2 workers (20 ms service, 2 % HTTP 500)', {
  timeout: 420_000,
}, async (t) => {
  const service = await startEnrichService({ latencyMs: 20, errorRate: 0.02 });
  const chaos = rng(77);
  const { id, input, output, env } = await jobTopics('t-async', 4);
  const group = workerGroup(t, id);
  const jobEnv = { ...env, TEST_SERVICE_URL: service.url, TEST_ASYNC_CONCURRENCY: '16' };
  const args = [
    '--processing.guarantee',
    'exactly_once',
    '--kafka.sessionTimeoutMs',
    '6000',
    '--kafka.heartbeatIntervalMs',
    '1000',
  ];
  const slots = [0, 1].map((i) => ({
    name: `a${i}`,
    stateDir: mkdtempSync(join(tmpdir(), `sluice-async-${i}-`)),
  }));
  const workers: WorkerProcess[] = slots.map((s) =>
    group.add(spawnWorker('async-enrich', { ...s, env: jobEnv, args })),
  );
  const gen = new RunningSumInput({ seed: 5, keys: 500 });
  let producing = true;
  const producer = (async () => {
    const slices = 24;
    for (let s = 0; s < slices; s++) {
      await produce(input, gen.next(Math.ceil(N / slices)));
      if (producing) await sleep(500);
    }
  })();
  const events: string[] = [];
  try {
    await group.step('both workers serve HTTP', () => Promise.all(workers.map((w) => w.url())));
    await sleep(3000);
    // The retries each incarnation counted, read before it is killed: the live ones at the end
    // may have made few calls (the input can be all processed before the last restart).
    const retriesOf = async (w: WorkerProcess) =>
      metricValue(await w.metrics().catch(() => ''), 'sluice_async_retries_total', { operator: 'enrich' }) ??
      0;
    let retries = 0;
    for (let i = 0; i < KILLS; i++) {
      const victim = i % 2;
      retries += await retriesOf(workers[victim]!);
      // Records are in flight in the stage when the worker dies: they must run again, once.
      await workers[victim]!.kill('SIGKILL');
      workers[victim] = group.add(spawnWorker('async-enrich', { ...slots[victim]!, env: jobEnv, args }));
      events.push(`a${victim}:kill`);
      await sleep(2500 + chaos() * 2500);
    }
    // A freeze past the session: the other worker takes over while this one holds results of
    // calls in flight; thawed, its checkpoint is fenced.
    const frozen = workers[0]!;
    frozen.child.kill('SIGSTOP');
    await sleep(9000);
    frozen.child.kill('SIGCONT');
    events.push('a0:stop9s');
    await producer;
    producing = false;
    const want = gen.count;
    let out: ReadRecord[] = [];
    const t0 = Date.now();
    while (Date.now() - t0 < 180_000) {
      out = await readJava(output);
      if (out.length >= want) break;
      await sleep(3000);
    }
    t.diagnostic(
      `events: ${events.join(' ')}; ${want} records; service calls ${service.stats.calls}, HTTP 500s ${service.stats.errors}, peak calls in flight ${service.stats.peak}`,
    );
    if (out.length !== want)
      for (const w of workers) console.error(`--- ${w.name} ---\n${w.logs.slice(-40).join('\n')}`);
    assertExactRunningSums(out, gen.expected);
    assertTags(out);
    assert.ok(service.stats.errors > 0, 'the service did fail some calls (retried)');
    const dlq = await readJava(`${id}-dlq`).catch(() => []);
    assert.equal(dlq.length, 0, 'no record exhausted its retries');
    for (const w of workers) retries += await retriesOf(w);
    assert.ok(retries > 0, `retries counted (the service failed ${service.stats.errors} calls)`);
  } finally {
    producing = false;
    for (const w of workers) w.child.kill('SIGCONT');
    await producer.catch(() => undefined);
    await service.close();
  }
});

test('records of keys whose calls hang should time out into the DLQ while every other key keeps flowing', {
  timeout: 240_000,
}, async (t) => {
  const hang = new Set(['k3', 'k11']);
  const service = await startEnrichService({ latencyMs: 5, hang });
  const { id, input, output, env } = await jobTopics('t-async-hang', 2);
  const group = workerGroup(t, id);
  const jobEnv = {
    ...env,
    TEST_SERVICE_URL: service.url,
    TEST_ASYNC_CONCURRENCY: '32',
    // Generous for a loaded 2-core machine: a normal call (5 ms) must never time out.
    TEST_ASYNC_TIMEOUT_MS: '4000',
    TEST_ASYNC_RETRIES: '0',
  };
  const w = group.add(
    spawnWorker('async-enrich', {
      name: 'hang',
      env: jobEnv,
      args: ['--processing.guarantee', 'exactly_once'],
    }),
  );
  try {
    await group.step('worker serves HTTP', () => w.url());
    const gen = new RunningSumInput({ seed: 9, keys: 200 });
    // About 5 records per hung key: they time out one after another (per-key order), 4 s each.
    const records = gen.next(1000);
    const hungSeqs = new Set(
      records
        .filter((r) => hang.has(r.key as string))
        .map((r) => (JSON.parse(r.value as string) as { seq: number }).seq),
    );
    await produce(input, records);
    const expected = new Map([...gen.expected].filter(([k]) => !hang.has(k)));
    let want = 0;
    for (const l of expected.values()) want += l.length;
    // The other keys' outputs arrive while the hung keys' records still wait out their timeouts
    // one by one (per-key order): flowing means they do not wait for those.
    let out: ReadRecord[] = [];
    const t0 = Date.now();
    while (Date.now() - t0 < 120_000) {
      out = await readJava(output);
      if (out.length >= want) break;
      await sleep(3000);
    }
    const flowedMs = Date.now() - t0;
    if (out.length !== want) {
      console.error(w.logs.slice(-60).join('\n'));
      console.error(
        (await w.metrics())
          .split('\n')
          .filter((l) => l.includes('async') || l.includes('lag'))
          .join('\n'),
      );
      console.error(JSON.stringify(service.stats));
    }
    assertExactRunningSums(out, expected);
    assertTags(out);
    let dlq: ReadRecord[] = [];
    while (Date.now() - t0 < 180_000) {
      dlq = await readJava(`${id}-dlq`);
      if (dlq.length >= hungSeqs.size) break;
      await sleep(2000);
    }
    t.diagnostic(
      `${want} records of other keys out in ${flowedMs} ms; ${hungSeqs.size} hung records; ${dlq.length} dead letters`,
    );
    assert.equal(dlq.length, hungSeqs.size, 'every hung record, once');
    const seqs = new Set(dlq.map((d) => (JSON.parse(d.value!) as { seq: number }).seq));
    assert.deepEqual([...seqs].sort(), [...hungSeqs].sort());
    for (const d of dlq) {
      assert.equal(d.headers?.['sluice.error.class'], 'AsyncTimeoutError');
      assert.equal(d.headers?.['sluice.error.operator'], 'enrich');
    }
    const text = await w.metrics();
    assert.equal(metricValue(text, 'sluice_async_timeouts_total', { operator: 'enrich' }), hungSeqs.size);
  } finally {
    await service.close();
  }
});

test('a service far slower than the input should make lag, not memory: the stage stays within its bound (backpressure)', {
  timeout: 180_000,
}, async (t) => {
  // Capacity: concurrency 4 × 2 tasks / 0.5 s = 16 records/s; 20,000 records wait in Kafka.
  const service = await startEnrichService({ latencyMs: 500 });
  const { id, input, output, env } = await jobTopics('t-async-slow', 2);
  const group = workerGroup(t, id);
  const jobEnv = {
    ...env,
    TEST_SERVICE_URL: service.url,
    TEST_ASYNC_CONCURRENCY: '4',
    TEST_ASYNC_RETRIES: '0',
  };
  const w = group.add(
    spawnWorker('async-enrich', {
      name: 'slow',
      env: jobEnv,
      args: ['--processing.guarantee', 'exactly_once'],
    }),
  );
  try {
    await group.step('worker serves HTTP', () => w.url());
    await produce(input, new RunningSumInput({ seed: 11, keys: 1000 }).next(20_000));
    let maxInFlight = 0;
    let maxCalls = 0;
    const rss: number[] = [];
    const t0 = Date.now();
    while (Date.now() - t0 < 20_000) {
      await sleep(500);
      const text = await w.metrics();
      for (const task of ['0_0', '0_1'])
        maxInFlight = Math.max(maxInFlight, metricValue(text, 'sluice_async_in_flight', { task }) ?? 0);
      maxCalls = Math.max(maxCalls, service.stats.peak);
      rss.push(metricValue(text, 'sluice_node_process_resident_memory_bytes') ?? Number.NaN);
    }
    // What has come out (committed or not) against what went in: the rest waits in Kafka.
    const offsets = await withAdmin((a) => a.fetchTopicOffsets(output));
    const out = offsets.reduce((n, p) => n + Number(p.high), 0);
    t.diagnostic(
      `max records in a task's stage ${maxInFlight}; peak calls at the service ${maxCalls}; ${out} of 20,000 records out; RSS ${rss.map((r) => Math.round(r / 2 ** 20)).join(' ')} MiB`,
    );
    // Backlogged at 2 × concurrency (8); one slice of `concurrency` (4) may enter just below it.
    assert.ok(maxInFlight > 0 && maxInFlight <= 11, `a stage holds at most 11 records (got ${maxInFlight})`);
    assert.ok(maxCalls <= 8, `at most concurrency × tasks calls at once (got ${maxCalls})`);
    assert.ok(out < 5000, `the input waits in Kafka (${out} records out)`);
  } finally {
    await service.close();
  }
});
