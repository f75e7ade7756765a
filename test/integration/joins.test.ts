import assert from 'node:assert/strict';
import { test } from 'node:test';
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

const json = (key: string, v: unknown): TestRecord => ({ key, value: JSON.stringify(v) });

async function consumed(w: WorkerProcess, topic: string, n: number) {
  await eventually(async () => metricSum(await w.metrics(), 'sluice_records_in_total', { topic }) >= n, {
    what: `${n} records of ${topic} consumed`,
    timeoutMs: 90_000,
  });
}

test('joins should give the reference results: stream-table (inner and left), windowed stream-stream with out-of-order input on both sides, and connect with shared state', {
  timeout: 240_000,
}, async (t) => {
  const id = uniqueName('t-join');
  const topic = (n: string) => `${id}-${n}`;
  const names = [
    'users',
    'orders',
    'enriched',
    'enriched-left',
    'left',
    'right',
    'pairs',
    'words',
    'blocks',
    'allowed',
  ];
  await createTopics(names.map((n) => ({ topic: topic(n), partitions: 3 })));
  const w = spawnWorker('joins', { name: 'joins', env: { TEST_APP_ID: id } });
  t.after(async () => {
    await w.kill('SIGKILL');
    await deleteTopicsMatching(id);
  });
  const random = rng(7);

  // The table first (a later value replaces an earlier one; a tombstone deletes), then the orders.
  const users: TestRecord[] = [];
  for (let i = 0; i < 30; i++) users.push(json(`u${i}`, { name: `first-${i}` }));
  for (let i = 0; i < 30; i += 3) users.push(json(`u${i}`, { name: `second-${i}` }));
  users.push({ key: 'u7', value: null });
  await produce(topic('users'), users);
  await consumed(w, topic('users'), users.length);
  const table = new Map<string, string>();
  for (const u of users) {
    if (u.value === null) table.delete(u.key!);
    else table.set(u.key!, JSON.parse(u.value as string).name);
  }
  const orders: Array<{ k: string; v: number; t: number }> = [];
  for (let i = 0; i < 600; i++)
    orders.push({ k: `u${Math.floor(random() * 40)}`, v: i, t: 1_000_000 - Math.floor(random() * 100_000) });
  await produce(
    topic('orders'),
    orders.map((o) => json(o.k, o)),
  );
  const inner = orders
    .filter((o) => table.has(o.k))
    .map((o) => JSON.stringify({ ...o, name: table.get(o.k) }));
  const leftRef = orders.map((o) => JSON.stringify({ ...o, name: table.get(o.k) ?? null }));
  const enriched = await readAll(topic('enriched'), { expected: inner.length });
  assert.deepEqual(
    enriched.map((r) => r.value).sort(),
    inner.sort(),
    'inner join: orders with a user, once each',
  );
  const enrichedLeft = await readAll(topic('enriched-left'), { expected: leftRef.length });
  assert.deepEqual(enrichedLeft.map((r) => r.value).sort(), leftRef.sort(), 'left join: every order, once');
  assert.ok(inner.length > 300 && inner.length < 600, `some orders have no user (${inner.length} joined)`);

  // Stream-stream: event time rises on both sides with up to 1.5 s of disorder; every pair of a
  // key at most 2 s apart joins exactly once, whichever side came first.
  const left: Array<{ k: string; v: number; t: number }> = [];
  const right: Array<{ k: string; v: number; t: number }> = [];
  for (let i = 0; i < 800; i++) {
    const side = random() < 0.5 ? left : right;
    side.push({ k: `p${Math.floor(random() * 8)}`, v: i, t: 500_000 + i * 25 - Math.floor(random() * 1500) });
  }
  const pairs: string[] = [];
  for (const l of left)
    for (const r of right)
      if (l.k === r.k && Math.abs(l.t - r.t) <= 2000)
        pairs.push(JSON.stringify({ l: l.v, r: r.v, lt: l.t, rt: r.t }));
  // Interleave the two sides in slices so that each sees the other both ahead and behind.
  for (let i = 0; i < 800; i += 100) {
    await produce(
      topic('left'),
      left.filter((x) => x.v >= i && x.v < i + 100).map((x) => json(x.k, x)),
    );
    await produce(
      topic('right'),
      right.filter((x) => x.v >= i && x.v < i + 100).map((x) => json(x.k, x)),
    );
  }
  const got = await readAll(topic('pairs'), { expected: pairs.length, timeoutMs: 90_000 });
  assert.ok(pairs.length > 500, `the input makes many pairs (${pairs.length})`);
  const gotValues = got.map((r) => r.value!);
  const missing = pairs.filter((p) => !gotValues.includes(p));
  const extra = gotValues.filter((p) => !pairs.includes(p));
  assert.deepEqual(
    gotValues.sort(),
    pairs.sort(),
    `every pair within 2 s exactly once (got ${gotValues.length}, expected ${pairs.length}; missing ${missing.slice(0, 5)}; extra ${extra.slice(0, 5)})`,
  );
  assert.equal(metricSum(await w.metrics(), 'sluice_late_records_total', { operator: 'pair' }), 0);

  // Connect: the control stream blocks w3 and w5, then unblocks w5, before the words come.
  await produce(topic('blocks'), [
    json('w3', { blocked: true }),
    json('w5', { blocked: true }),
    json('w5', { blocked: false }),
  ]);
  await consumed(w, topic('blocks'), 3);
  const words = Array.from({ length: 200 }, (_, n) => ({ w: `w${n % 10}`, n }));
  await produce(
    topic('words'),
    words.map((x) => json(x.w, x)),
  );
  const allowedRef = words.filter((x) => x.w !== 'w3').map((x) => JSON.stringify(x));
  const allowed = await readAll(topic('allowed'), { expected: allowedRef.length });
  assert.deepEqual(
    allowed.map((r) => r.value).sort(),
    allowedRef.sort(),
    'blocked words never pass, others once',
  );

  // Every input of every two-input task has its offsets committed to the end (a batch of one
  // input processed while the other's checkpoint was in flight must not lose its offsets).
  await eventually(
    () =>
      withAdmin(async (admin) => {
        for (const n of ['users', 'orders', 'left', 'right', 'words', 'blocks']) {
          const high = await admin.fetchTopicOffsets(topic(n));
          const [committed] = await admin.fetchOffsets({ groupId: id, topics: [topic(n)] });
          for (const h of high) {
            const c = committed!.partitions.find((p) => p.partition === h.partition)!;
            if (h.high !== '0' && c.offset !== h.high)
              throw new Error(`${n}[${h.partition}] committed ${c.offset}, end ${h.high}`);
          }
        }
        return true;
      }),
    { what: 'every input committed to its end', timeoutMs: 30_000 },
  );
});
