import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  eventually,
  jobTopics,
  produce,
  type ReadRecord,
  readAll,
  type TestRecord,
  withAdmin,
} from '../helpers/kafka.js';
import { rng } from '../helpers/running-sum.js';
import { allTasksRunning, metricSum, spawnWorker, workerGroup } from '../helpers/workers.js';

const PARTITIONS = 3;
const KEYS = 100;
/** Distinct keys of the bulk records: big map state, to see a restore take a while. */
const BULK = Number(process.env.TEST_PRIMITIVES_BULK ?? 150_000);
/** Outputs per (non-bulk) record: count, reduce, aggregate and process. */
const OPS = 4;

/**
 * What test/fixtures/jobs/state-primitives.ts must emit, per `op` and key, in order: the same
 * logic as the job on plain JavaScript values, fed every produced (non-bulk) record.
 */
class Model {
  readonly expected = new Map<string, unknown[]>();
  readonly #keys = new Map<
    string,
    { n: number; sum: number; sq: number; max: number; hist: Map<number, number>; recent: number[] }
  >();
  #seq = 0;
  readonly #random = rng(11);

  get records(): number {
    return this.#seq;
  }

  /** The next `n` records over KEYS keys, v in 1..4 (so map entries often reach 3 and go). */
  next(n: number): TestRecord[] {
    const out: TestRecord[] = [];
    for (let i = 0; i < n; i++) {
      const k = `k${Math.floor(this.#random() * KEYS)}`;
      const v = 1 + Math.floor(this.#random() * 4);
      const seq = this.#seq++;
      out.push({ key: k, value: JSON.stringify({ k, v, seq }) });
      let s = this.#keys.get(k);
      if (!s) this.#keys.set(k, (s = { n: 0, sum: 0, sq: 0, max: 0, hist: new Map(), recent: [] }));
      s.n++;
      s.sum += v;
      s.sq += v * v;
      s.max = Math.max(s.max, v);
      const c = (s.hist.get(v) ?? 0) + 1;
      if (c >= 3) s.hist.delete(v);
      else s.hist.set(v, c);
      s.recent.push(v);
      const recent = [...s.recent];
      if (s.recent.length >= 4) s.recent = [];
      this.#add('count', k, { op: 'count', k, n: s.n });
      this.#add('reduce', k, { op: 'reduce', k, sum: s.sum, seq });
      this.#add('aggregate', k, { op: 'aggregate', k, n: s.n, sq: s.sq, max: s.max });
      // Map state iterates in the byte order of its serialized keys (JSON here), as RocksDB stores them.
      const entries = [...s.hist.entries()].sort((a, b) =>
        Buffer.compare(Buffer.from(JSON.stringify(a[0])), Buffer.from(JSON.stringify(b[0]))),
      );
      this.#add('process', k, {
        op: 'process',
        k,
        seq,
        entries,
        keys: entries.map(([key]) => key),
        size: s.hist.size,
        had: s.hist.has(v),
        recent,
      });
    }
    return out;
  }

  #add(op: string, k: string, v: unknown): void {
    const id = `${op}/${k}`;
    let l = this.expected.get(id);
    if (!l) this.expected.set(id, (l = []));
    l.push(v);
  }
}

/** Asserts `out` holds exactly the model's outputs: per op and key, each once and in order. */
function assertExact(out: ReadRecord[], model: Model): void {
  assert.equal(out.length, model.records * OPS, 'one output per operator and record, none twice');
  const got = new Map<string, unknown[]>();
  const sorted = [...out].sort(
    (a, b) => a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)),
  );
  for (const r of sorted) {
    const v = JSON.parse(r.value!) as { op: string; k: string };
    const id = `${v.op}/${v.k}`;
    let l = got.get(id);
    if (!l) got.set(id, (l = []));
    l.push(v);
  }
  assert.equal(got.size, model.expected.size, 'op/key pairs in the output');
  for (const [id, want] of model.expected) assert.deepEqual(got.get(id), want, `${id}: exact, in order`);
}

test('mapState, listState and the DSL count, reduce and aggregate should give exact results, restart with nothing to replay, and restore fully on an empty state dir (not ready while restoring)', {
  timeout: 420_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-prims', PARTITIONS);
  const group = workerGroup(t, id);
  const start = (name: string, stateDir: string, args: string[] = []) =>
    group.add(spawnWorker('state-primitives', { name, stateDir, env, args }));
  const step = group.step;
  // Two sub-topologies (source → repartition, repartition → state), one task per partition each.
  const TASKS = 2 * PARTITIONS;
  const model = new Model();
  const stateA = mkdtempSync(join(tmpdir(), 'sluice-prims-a-'));

  let w = start('a1', stateA);
  await step('produce 3000', () => produce(input, model.next(3000)));
  assertExact(
    await step('read exact outputs', () => readAll(output, { expected: model.records * OPS })),
    model,
  );

  // The internal topics: the repartition topic as wide as the source, compacted changelogs.
  const repartition = `${id}-by-k-repartition`;
  const changelogs = ['count-agg', 'reduce-agg', 'stats-agg', 'prims-hist', 'prims-recent'].map(
    (s) => `${id}-${s}-changelog`,
  );
  await withAdmin(async (admin) => {
    const md = await admin.fetchTopicMetadata({ topics: [input, repartition, ...changelogs] });
    const counts = new Map(md.topics.map((x) => [x.name, x.partitions.length]));
    assert.equal(
      counts.get(repartition),
      counts.get(input),
      `${repartition} has the source's partition count`,
    );
    assert.equal(counts.get(input), PARTITIONS);
    for (const c of changelogs) assert.equal(counts.get(c), PARTITIONS, `${c}: one partition per task`);
    const cfg = await admin.describeConfigs({
      includeSynonyms: false,
      // 2 is ConfigResourceTypes.TOPIC.
      resources: changelogs.map((name) => ({ type: 2, name, configNames: ['cleanup.policy'] })),
    });
    for (const c of changelogs) {
      const r = cfg.resources.find((x) => x.resourceName === c);
      const policy = r?.configEntries.find((e) => e.configName === 'cleanup.policy')?.configValue;
      assert.equal(policy, 'compact', `${c} is compacted`);
    }
  });

  // (a) A clean restart: the local state is current, nothing replayed; results stay exact.
  assert.equal(await step('stop a1', () => w.kill('SIGTERM')), 0);
  // a2 is stopped for good before b takes over: a static member leaves only when told to.
  w = start('a2', stateA, ['--leave-group-on-stop']);
  await step('a2 running every task', () =>
    eventually(() => allTasksRunning(w, TASKS), { what: 'a2 running' }),
  );
  assert.equal(
    metricSum(await w.metrics(), 'sluice_restore_records_total'),
    0,
    'a clean restart replays 0 changelog records',
  );
  await step('produce 1000', () => produce(input, model.next(1000)));
  assertExact(
    await step('read exact outputs', () => readAll(output, { expected: model.records * OPS })),
    model,
  );

  // Big state: BULK distinct keys, one map entry each, no output.
  const bulk: TestRecord[] = [];
  for (let i = 0; i < BULK; i++) {
    const k = `b${i}`;
    bulk.push({ key: k, value: JSON.stringify({ k, v: 1, seq: -1, bulk: true }) });
  }
  await step(`produce ${BULK} bulk records`, () => produce(input, bulk, 10_000));
  // a2 has read every record since it started from the repartition topic once processed.
  const sinceA2 = 1000 + BULK;
  await step('a2 processed the bulk', () =>
    eventually(
      async () => metricSum(await w.metrics(), 'sluice_records_in_total', { topic: repartition }) >= sinceA2,
      { what: 'the bulk processed', timeoutMs: 180_000, intervalMs: 500 },
    ),
  );
  assert.equal(await step('stop a2', () => w.kill('SIGTERM')), 0);

  // (b) An empty state dir: not ready while restoring, then ready, with every entry replayed.
  w = start('b', mkdtempSync(join(tmpdir(), 'sluice-prims-b-')));
  const url = await w.url();
  const seen: Array<{ status: number; body: string }> = [];
  await step('b ready', () =>
    eventually(
      async () => {
        const r = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(5000) });
        const s = { status: r.status, body: await r.text() };
        const last = seen[seen.length - 1];
        if (!last || last.status !== s.status || last.body !== s.body) seen.push(s);
        return s.status === 200;
      },
      { what: '/readyz 200', timeoutMs: 120_000, intervalMs: 20 },
    ),
  );
  t.diagnostic(`/readyz answers in order: ${seen.map((s) => `${s.status} ${s.body.trim()}`).join(' | ')}`);
  assert.ok(
    // A task of sub-topology 1 is one with state: it restores from its changelogs.
    seen.some((s) => s.status === 503 && /^not ready: restoring .*\b1_\d/.test(s.body)),
    `at least one 503 "not ready: restoring …" naming a stateful task before ready (saw: ${seen.map((s) => `${s.status} ${s.body.trim()}`).join(' | ')})`,
  );
  assert.deepEqual(seen[seen.length - 1], { status: 200, body: 'ready\n' });
  await step('b running every task', () =>
    eventually(() => allTasksRunning(w, TASKS), { what: 'b running' }),
  );
  const restored = metricSum(await w.metrics(), 'sluice_restore_records_total');
  t.diagnostic(`restored ${restored} changelog records`);
  assert.ok(restored >= BULK + KEYS, `restored every store from its changelog (${restored} records)`);
  // Later outputs continue from the restored state of every store.
  await step('produce 1000', () => produce(input, model.next(1000)));
  assertExact(
    await step('read exact outputs', () => readAll(output, { expected: model.records * OPS })),
    model,
  );
});
