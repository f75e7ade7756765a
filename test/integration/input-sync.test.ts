import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  createTopics,
  deleteTopicsMatching,
  produce,
  readAll,
  type TestRecord,
  uniqueName,
} from '../helpers/kafka.js';
import { rng } from '../helpers/running-sum.js';
import { spawnWorker } from '../helpers/workers.js';

const USERS = 500;
const CLICKS = 40_000;

/**
 * Issue 13, item 8: a task with several inputs takes their records in timestamp order
 * (`processing.maxTaskIdleMs`). A table whose rows are all older than every click, both topics
 * filled before the job starts, the clicks produced first (so that fetch order favours them):
 * every click must find its user. Before, the task joined whatever the consumer handed it first,
 * and most clicks met a table not loaded yet.
 */
test('a stream-table join started on existing data should match every click against a table with older timestamps', {
  timeout: 240_000,
}, async (t) => {
  const id = uniqueName('t-isync');
  const topic = (n: string) => `${id}-${n}`;
  await createTopics(['clicks', 'users', 'enriched'].map((n) => ({ topic: topic(n), partitions: 2 })));
  t.after(async () => deleteTopicsMatching(id));
  const random = rng(13);
  const t0 = Date.now() - 3_600_000;
  const clicks: TestRecord[] = [];
  const ref: string[] = [];
  for (let i = 0; i < CLICKS; i++) {
    const u = Math.floor(random() * USERS);
    clicks.push({ key: `u${u}`, value: JSON.stringify({ i }), timestamp: String(t0 + 600_000 + i) });
    ref.push(JSON.stringify({ i, name: `user-${u}` }));
  }
  const users: TestRecord[] = [];
  for (let u = 0; u < USERS; u++)
    users.push({ key: `u${u}`, value: JSON.stringify({ name: `user-${u}` }), timestamp: String(t0 + u) });
  // The stream first: a consumer that takes what comes first meets the clicks before the table.
  await produce(topic('clicks'), clicks);
  await produce(topic('users'), users);

  const w = spawnWorker('click-join', {
    name: 'isync',
    env: { TEST_APP_ID: id },
    args: ['--log-level', 'warn'],
  });
  t.after(async () => {
    await w.kill('SIGKILL');
  });
  const out = await readAll(topic('enriched'), { expected: CLICKS, timeoutMs: 180_000 });
  const got = out.map((r) => r.value!);
  const unmatched = got.filter((v) => JSON.parse(v).name === null).length;
  assert.equal(unmatched, 0, `clicks that joined no user (of ${got.length})`);
  assert.deepEqual(got.sort(), ref.sort(), 'every click once, with its user');
});
