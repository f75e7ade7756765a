import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  deleteTopicsMatching,
  eventually,
  jobTopics,
  produce,
  readAll,
  withAdmin,
} from '../helpers/kafka.js';
import { allTasksRunning, metricSum, spawnWorker, type WorkerProcess } from '../helpers/workers.js';

const KEYS = 50;

function records(from: number, n: number) {
  return Array.from({ length: n }, (_, j) => {
    const i = from + j;
    const k = `k${i % KEYS}`;
    return { key: k, value: JSON.stringify({ k, v: 1, seq: i }) };
  });
}

function sortByOffset<T extends { partition: number; offset: string }>(out: T[]): T[] {
  return out.sort((a, b) => a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)));
}

/** Checks the output holds, per key, exactly the counts 1..n in order. */
function assertExactCounts(
  out: Array<{ value: string | null; partition: number; offset: string }>,
  total: number,
) {
  assert.equal(out.length, total, 'every update once');
  const byKey = new Map<string, number[]>();
  for (const r of sortByOffset(out)) {
    const v = JSON.parse(r.value!);
    const l = byKey.get(v.k) ?? [];
    l.push(v.n);
    byKey.set(v.k, l);
  }
  for (const [k, ns] of byKey)
    assert.deepEqual(
      ns,
      ns.map((_, i) => i + 1),
      `key ${k} counts in order, none twice`,
    );
}

test('restart should replay no changelog record after a clean stop, at most the local checkpoint bound after a crash, and all of it on a new worker', {
  timeout: 300_000,
}, async (t) => {
  const topics = await jobTopics('t-restart', 4);
  const { id, input, output } = topics;
  // Committed writes wait in memory for RocksDB until this many changelog records went by
  // (state.localCheckpointRecords): what a crash may cost in replay, per task and store.
  const LOCAL = 10;
  const env = { ...topics.env, SLUICE_STATE_LOCAL_CHECKPOINT_RECORDS: String(LOCAL) };
  const stateA = mkdtempSync(join(tmpdir(), 'sluice-a-'));
  const live: WorkerProcess[] = [];
  const start = (name: string, stateDir: string) => {
    const w = spawnWorker('running-sum', { name, stateDir, env });
    live.push(w);
    return w;
  };
  t.after(async () => {
    await Promise.all(live.map((w) => w.kill('SIGKILL')));
    await deleteTopicsMatching(id);
  });

  let a = start('a1', stateA);
  await produce(input, records(0, 2000));
  await readAll(output, { expected: 2000 });
  assert.equal(await a.kill('SIGTERM'), 0);

  // Clean restart: the local state is current, nothing to replay.
  a = start('a2', stateA);
  await eventually(() => allTasksRunning(a, 8), { what: 'a2 running all tasks' });
  const m1 = await a.metrics();
  assert.equal(
    metricSum(m1, 'sluice_restore_records_total'),
    0,
    'a clean restart replays 0 changelog records',
  );

  // Crash mid-stream: per task, fewer than LOCAL records waited for RocksDB, plus at most one
  // checkpoint that Kafka committed and RocksDB did not take (one record per dirty key).
  const produced = produce(input, records(2000, 20_000), 500);
  await new Promise((r) => setTimeout(r, 1500));
  await a.kill('SIGKILL');
  await produced;
  a = start('a3', stateA);
  await eventually(() => allTasksRunning(a, 8), { what: 'a3 running all tasks' });
  const m2 = await a.metrics();
  const replayed = metricSum(m2, 'sluice_restore_records_total');
  const bound = 8 * (LOCAL - 1) + KEYS;
  assert.ok(
    replayed <= bound,
    `a crash replays at most what waited and one checkpoint (${replayed} <= ${bound})`,
  );
  await readAll(output, { expected: 22_000 });

  // A second worker with an empty state folder takes half the tasks and restores them fully.
  const b = start('b', mkdtempSync(join(tmpdir(), 'sluice-b-')));
  await eventually(async () => (await allTasksRunning(a, 4)) && (await allTasksRunning(b, 4)), {
    what: 'tasks split 4/4',
  });
  const mb = await b.metrics();
  const restoredB = metricSum(mb, 'sluice_restore_records_total');
  assert.ok(
    restoredB >= KEYS / 2,
    `the new worker restored its tasks' state from the changelog (${restoredB} records)`,
  );
  await produce(input, records(22_000, 2000));
  const out = await readAll(output, { expected: 24_000 });
  assertExactCounts(out, 24_000);
});

test('a changelog deleted and recreated under a task should be detected and the local state rebuilt', {
  timeout: 180_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-recreate', 1);
  const stateDir = mkdtempSync(join(tmpdir(), 'sluice-r-'));
  const live: WorkerProcess[] = [];
  t.after(async () => {
    await Promise.all(live.map((w) => w.kill('SIGKILL')));
    await deleteTopicsMatching(id);
  });
  let w = spawnWorker('running-sum', { name: 'r1', stateDir, env });
  live.push(w);
  await produce(input, records(0, 500));
  await readAll(output, { expected: 500 });
  assert.equal(await w.kill('SIGTERM'), 0);

  const changelog = `${id}-sum-acc-changelog`;
  await withAdmin(async (admin) => {
    await admin.deleteTopics({ topics: [changelog] });
    await eventually(async () => !(await admin.listTopics()).includes(changelog), {
      what: 'changelog deleted',
    });
  });
  // The worker recreates the (now empty) changelog; its stored offsets lie past the new end.
  w = spawnWorker('running-sum', { name: 'r2', stateDir, env });
  live.push(w);
  await eventually(() => allTasksRunning(w, 2), { what: 'r2 running' });
  assert.ok(
    w.logs.some((l) => l.includes('local state does not match its changelog')),
    'the mismatch is detected and logged',
  );
  assert.ok(metricSum(await w.metrics(), 'sluice_errors_total', { kind: 'state_corrupted' }) >= 1);
  // Rebuilt from the (empty) changelog: the next update of k0 starts from nothing.
  await produce(input, [{ key: 'k0', value: JSON.stringify({ k: 'k0', v: 1, seq: 9999 }) }]);
  const out = await readAll(output, { expected: 501 });
  const last = JSON.parse(out[out.length - 1]!.value!);
  assert.deepEqual([last.k, last.n], ['k0', 1], 'local state was wiped and rebuilt from the changelog');
});

/** The log-end offset of partition 0 of a topic. */
async function endOffset(topic: string): Promise<bigint> {
  return withAdmin(async (admin) => {
    const p = (await admin.fetchTopicOffsets(topic)).find((x) => x.partition === 0);
    return BigInt(p?.high ?? '0');
  });
}

async function deleteTopic(topic: string): Promise<void> {
  await withAdmin(async (admin) => {
    await admin.deleteTopics({ topics: [topic] });
    await eventually(async () => !(await admin.listTopics()).includes(topic), { what: `${topic} deleted` });
  });
}

test('a changelog deleted under a running worker should be reported, recreated, and the state rebuilt from it', {
  timeout: 120_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-cl-running', 1);
  const live: WorkerProcess[] = [];
  t.after(async () => {
    await Promise.all(live.map((w) => w.kill('SIGKILL')));
    await deleteTopicsMatching(id);
  });
  const w = spawnWorker('running-sum', { name: 'd1', env });
  live.push(w);
  await produce(input, records(0, 500));
  await readAll(output, { expected: 500 });

  // Deleted under the worker, with records arriving: their checkpoint cannot write the changelog.
  await deleteTopic(`${id}-sum-acc-changelog`);
  const deletedAt = Date.now();
  await produce(input, records(500, KEYS));
  await eventually(() => w.logs.some((l) => l.includes('changelog deleted while its tasks ran')), {
    what: 'the deletion reported',
    timeoutMs: 20_000,
  });
  t.diagnostic(`reported after ${Date.now() - deletedAt} ms`);
  await eventually(() => allTasksRunning(w, 2), { what: 'tasks running again', timeoutMs: 30_000 }).catch(
    (e) => {
      console.error(w.logs.slice(-40).join('\n'));
      throw e;
    },
  );
  assert.ok(metricSum(await w.metrics(), 'sluice_errors_total', { kind: 'state_corrupted' }) >= 1);

  // Every record sent around the deletion is counted exactly once. It counts from 1 again (state
  // rebuilt from the recreated, empty changelog) or, when its checkpoint committed into the
  // recreated changelog before the task was reset, on from the old 10: a known window.
  const around = new Map<string, number>();
  for (const r of sortByOffset(await readAll(output, { expected: 500 + KEYS })).slice(500)) {
    const v = JSON.parse(r.value!);
    assert.ok(!around.has(v.k), `one update of ${v.k}`);
    assert.ok(v.n === 1 || v.n === 11, `${v.k} counts from the rebuilt state or on from 10, got ${v.n}`);
    around.set(v.k, v.n);
  }
  assert.equal(around.size, KEYS);
  t.diagnostic(`${[...around.values()].filter((n) => n === 1).length} of ${KEYS} keys counted from 1 again`);
  // From then on the state is exactly what the recreated changelog holds: each key goes on from
  // the count it last put out, once.
  await produce(input, records(500 + KEYS, KEYS));
  for (const r of sortByOffset(await readAll(output, { expected: 500 + 2 * KEYS })).slice(500 + KEYS)) {
    const v = JSON.parse(r.value!);
    assert.equal(v.n, around.get(v.k)! + 1, `${v.k} goes on from the recreated changelog's state`);
  }
  const stopping = Date.now();
  assert.equal(await w.kill('SIGTERM'), 0);
  assert.ok(Date.now() - stopping < 15_000, `a prompt shutdown (${Date.now() - stopping} ms)`);
});

test('a stale folder should be rebuilt when its changelog was recreated and grew past the stored offset', {
  timeout: 150_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-cl-stale', 1);
  const changelog = `${id}-sum-acc-changelog`;
  const stale = mkdtempSync(join(tmpdir(), 'sluice-stale-'));
  const live: WorkerProcess[] = [];
  // Each worker here stops for good before another folder's worker takes over: as a static member
  // it leaves the group on SIGTERM only when told to.
  const start = (name: string, stateDir?: string) => {
    const w = spawnWorker('running-sum', { name, stateDir, env, args: ['--leave-group-on-stop'] });
    live.push(w);
    return w;
  };
  t.after(async () => {
    await Promise.all(live.map((w) => w.kill('SIGKILL')));
    await deleteTopicsMatching(id);
  });
  const a = start('s1', stale);
  await produce(input, records(0, 500));
  await readAll(output, { expected: 500 });
  assert.equal(await a.kill('SIGTERM'), 0);
  const storedEnd = await endOffset(changelog);

  // Another worker, with its own folder, owns the task meanwhile: it recreates the changelog and
  // writes it past the offset the stale folder stored.
  await deleteTopic(changelog);
  const b = start('s2');
  let produced = 500;
  while ((await endOffset(changelog).catch(() => 0n)) <= storedEnd) {
    await produce(input, records(produced, 200));
    produced += 200;
    await readAll(output, { expected: produced });
  }
  assert.equal(await b.kill('SIGTERM'), 0);

  // The stale folder comes back: its stored offset is within the new changelog's range.
  const c = start('s3', stale);
  await eventually(() => allTasksRunning(c, 2), { what: 's3 running' });
  assert.ok(
    c.logs.some((l) => l.includes("last checkpoint's changelog record differs")),
    'the stale folder is detected by its fingerprint',
  );
  assert.ok(metricSum(await c.metrics(), 'sluice_errors_total', { kind: 'state_corrupted' }) >= 1);
  await produce(input, records(produced, KEYS));
  const out = sortByOffset(await readAll(output, { expected: produced + KEYS }));
  // After the first 500, the counts continue the recreated changelog's, not the stale folder's.
  assertExactCounts(out.slice(500), produced - 500 + KEYS);
});
