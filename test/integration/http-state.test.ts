import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deleteTopicsMatching, eventually, jobTopics, produce, readAll } from '../helpers/kafka.js';
import { spawnWorker, type WorkerProcess } from '../helpers/workers.js';

const KEYS = 40;
const N = 1200;

async function getJson(url: string): Promise<{ status: number; body: any; headers: Headers }> {
  const r = await fetch(url, { signal: AbortSignal.timeout(20_000) });
  return { status: r.status, body: await r.json(), headers: r.headers };
}

async function ownsRunningTasks(w: WorkerProcess): Promise<boolean> {
  const s = await w.status();
  return s.tasks.length > 0 && s.tasks.every((t: any) => t.state === 'running') && s.group.state === 'Stable';
}

test('state queries should answer every key from either worker, forwarding to the owner, with /status describing the group', {
  timeout: 240_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-http-state', 4);
  const a = spawnWorker('running-sum', { name: 'a', env });
  const b = spawnWorker('running-sum', { name: 'b', env });
  t.after(async () => {
    await Promise.all([a.kill('SIGTERM'), b.kill('SIGTERM')]);
    await deleteTopicsMatching(id);
  });
  const [ua, ub] = await Promise.all([a.url(), b.url()]);
  await eventually(async () => (await ownsRunningTasks(a)) && (await ownsRunningTasks(b)), {
    timeoutMs: 90_000,
    what: 'both workers to own running tasks',
  });

  const expected = new Map<string, { sum: number; n: number }>();
  const recs = Array.from({ length: N }, (_, i) => {
    const k = `key/${i % KEYS} é`; // slash, space and non-ASCII: the URL encoding must round-trip
    const v = (i * 7) % 13;
    const e = expected.get(k) ?? { sum: 0, n: 0 };
    expected.set(k, { sum: e.sum + v, n: e.n + 1 });
    return { key: null, value: JSON.stringify({ k, v, seq: i }) };
  });
  await produce(input, recs);
  const out = await readAll(output, { expected: N, settleMs: 500 });
  assert.equal(out.length, N);
  const outPartition = new Map(out.map((r) => [JSON.parse(r.value!).k as string, r.partition]));

  let forwardedByA = 0;
  let forwardedByB = 0;
  for (const [k, e] of expected) {
    const path = `/state/sum-acc/${encodeURIComponent(k)}`;
    const [ra, rb] = await Promise.all([getJson(ua + path), getJson(ub + path)]);
    for (const r of [ra, rb]) {
      assert.equal(r.status, 200, `${k}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.store, 'sum-acc');
      assert.equal(r.body.key, k);
      assert.deepEqual(r.body.value, e, `running sum of ${k}`);
      // The key's partition as Kafka's default partitioner put it in the (co-partitioned) output.
      assert.equal(r.body.partition, outPartition.get(k), `partition of ${k}`);
      assert.equal(r.body.task, `1_${r.body.partition}`);
    }
    // Exactly one of the two answered from its own state; the other forwarded to it.
    assert.equal(Boolean(ra.body.forwarded) !== Boolean(rb.body.forwarded), true, `${k}: one forwarded`);
    const fwd = ra.body.forwarded ? ra : rb;
    assert.equal(fwd.body.forwarded.to, fwd === ra ? ub : ua, 'forwarded to the other worker');
    assert.equal(fwd.headers.get('x-sluice-forwarded-to'), fwd.body.forwarded.to);
    assert.equal(fwd.body.worker.http, fwd.body.forwarded.to, 'answered by the owner');
    if (ra.body.forwarded) forwardedByA++;
    else forwardedByB++;
  }
  assert.ok(
    forwardedByA > 0 && forwardedByB > 0,
    `both workers own keys (a forwarded ${forwardedByA}, b ${forwardedByB})`,
  );

  // Absent key (routed to its owner, which answers 404), unknown store, bad path.
  for (const u of [ua, ub]) {
    const missing = await getJson(`${u}/state/sum-acc/${encodeURIComponent('no such key')}`);
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error, 'key not found');
    const noStore = await getJson(`${u}/state/nope/x`);
    assert.equal(noStore.status, 404);
    assert.equal(noStore.body.error, 'unknown store');
    assert.deepEqual(noStore.body.stores, ['sum-acc']);
    assert.equal((await getJson(`${u}/state/sum-acc`)).status, 400);
    const list = await getJson(`${u}/state`);
    assert.deepEqual(
      list.body.stores.map((s: any) => [s.name, s.kind, s.keySerde, s.partitions]),
      [['sum-acc', 'value', 'string', 4]],
    );
  }
  // A request that was forwarded once is never forwarded again.
  const hop = await fetch(`${ua}/state/sum-acc/${encodeURIComponent([...expected.keys()][0]!)}`, {
    headers: { 'x-sluice-forwarded-by': 'test' },
  });
  assert.ok(hop.status === 200 || hop.status === 503, `no second hop (${hop.status})`);
  if (hop.status === 503) assert.equal(((await hop.json()) as any).reason, 'rebalancing');

  // /status: the worker, the whole group with HTTP addresses, tasks with positions and lag.
  await eventually(async () => (await a.status()).group.members.length === 2, { what: 'group view' });
  const [sa, sb] = await Promise.all([a.status(), b.status()]);
  for (const [s, url] of [
    [sa, ua],
    [sb, ub],
  ] as const) {
    assert.equal(s.app, id);
    assert.equal(s.state, 'running');
    assert.equal(s.worker.http, url);
    assert.ok(s.worker.memberId, 'member id known');
    assert.deepEqual(s.readiness, { ready: true });
    assert.equal(s.group.state, 'Stable');
    assert.deepEqual(s.group.members.map((m: any) => m.http).sort(), [ua, ub].sort());
    const self = s.group.members.find((m: any) => m.self);
    assert.equal(self.memberId, s.worker.memberId);
    assert.deepEqual(self.tasks, s.tasks.map((x: any) => x.id).sort());
    assert.equal(s.group.members.flatMap((m: any) => m.tasks).length, 8, '2 sub-topologies × 4 partitions');
    for (const task of s.tasks) {
      assert.equal(task.state, 'running');
      for (const topic of task.topics) {
        assert.ok(task.topics.includes(topic));
        assert.ok(topic in task.positions && topic in task.lag);
      }
      if (task.subtopology === 1) {
        assert.deepEqual(task.stores, ['sum-acc']);
        assert.equal(task.restore.remaining, 0);
      }
    }
    assert.deepEqual(s.partitions, { 0: 4, 1: 4 });
    const names = s.operators.map((o: any) => o.name);
    assert.ok(names.includes('sum') && names.includes('by-k-source'), names.join(','));
  }
  const sumRecords = (s: any) => s.operators.find((o: any) => o.name === 'sum').records;
  assert.equal(sumRecords(sa) + sumRecords(sb), N, 'per-operator counts add up to the input');
  const pos = (s: any) =>
    s.tasks
      .filter((x: any) => x.subtopology === 0)
      .reduce((acc: number, x: any) => acc + Number(x.positions[input] ?? 0), 0);
  assert.equal(pos(sa) + pos(sb), N, 'input positions add up to the records produced');
});
