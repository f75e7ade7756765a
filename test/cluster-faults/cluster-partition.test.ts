import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { readCommittedWithJava } from '../../bench/java-reader.js';
import { startProxiedCluster, type TestCluster } from '../helpers/cluster.js';
import { brokers, jobTopics, type ReadRecord, testKafka, uniqueName } from '../helpers/kafka.js';
import { assertExactRunningSums, describeShortfall, RunningSumInput } from '../helpers/running-sum.js';
import type { TcpProxy } from '../helpers/tcp-proxy.js';
import { spawnWorker, type WorkerProcess, workerGroup } from '../helpers/workers.js';

/**
 * A network partition on a 3-node cluster: of 3 workers (running sum, exactly-once), one reaches
 * the brokers only through TCP proxies of the test's (a second listener on every broker advertises
 * the proxies' ports, so metadata never hands it the brokers' own addresses). The proxies are cut
 * (connections reset, new ones refused) for longer than the session timeout, then healed,
 * TEST_PARTITION_CUTS times (default 3). The cut-off worker must not stop the others (its tasks
 * move to them and their output goes on), must come back by itself after each heal (tasks again),
 * and the output, read by Kafka's own console consumer (read_committed), must be exact.
 */
const CUTS = Number(process.env.TEST_PARTITION_CUTS ?? 3);
const SESSION_MS = 6000;
const CUT_MS = SESSION_MS + 9000;
const MAX_CUT_MS = 60_000;
const PARTITIONS = 6;
const KEYS = 500;
const RATE = 500; // records a second

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let cluster: TestCluster;
let proxies: TcpProxy[];
let proxiedBrokers: string[];
before(
  async () => {
    ({ cluster, proxies, proxiedBrokers } = await startProxiedCluster());
  },
  { timeout: 240_000 },
);
after(async () => {
  for (const p of proxies ?? []) await p.cut();
  await cluster?.stop();
});

/** When each output partition last received a record (read_committed, straight to the brokers). */
async function outputClock(topic: string) {
  const last = new Map<number, number>();
  const c = testKafka().consumer({ groupId: uniqueName('clock'), maxWaitTimeInMs: 100 });
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  await c.run({
    eachBatch: async ({ batch }) => {
      if (batch.messages.length > 0) last.set(batch.partition, Date.now());
    },
  });
  return { last, stop: () => c.disconnect() };
}

const ownedTasks = async (w: WorkerProcess): Promise<string[]> =>
  ((await w.status()).tasks as Array<{ id: string }>).map((t) => t.id);

test('a worker cut off from the brokers past its session should lose its tasks without stopping the others, rejoin by itself, and leave the output exact', {
  timeout: 600_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-partition', PARTITIONS);
  const group = workerGroup(t, id);
  const args = [
    '--processing.guarantee',
    'exactly_once',
    '--kafka.sessionTimeoutMs',
    String(SESSION_MS),
    '--kafka.heartbeatIntervalMs',
    '1000',
    '--log-level',
    'info',
  ];
  const workers = Array.from({ length: 3 }, (_, i) =>
    group.add(
      spawnWorker('running-sum', {
        name: `w${i}`,
        stateDir: mkdtempSync(join(tmpdir(), `sluice-partition-${i}-`)),
        // w2 knows the brokers only by their proxies.
        env: i === 2 ? { ...env, KAFKA_BROKERS: proxiedBrokers.join(',') } : env,
        args,
      }),
    ),
  );
  const cutOff = workers[2]!;
  const gen = new RunningSumInput({ seed: 99, keys: KEYS });
  const producer = testKafka().producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  let producing = true;
  const feeding = (async () => {
    while (producing) {
      await producer.send({ topic: input, acks: -1, messages: gen.next(RATE / 4) });
      await sleep(250);
    }
  })();
  const clock = await outputClock(output);
  const events: string[] = [];
  try {
    await group.step('all workers own tasks', async () => {
      for (;;) {
        const owned = await Promise.all(workers.map((w) => ownedTasks(w).catch(() => [])));
        if (owned.every((o) => o.length > 0)) return;
        await sleep(500);
      }
    });
    const before = proxies.reduce((n, p) => n + p.accepted, 0);
    assert.ok(before > 0, 'the cut-off worker connects through the proxies');
    for (let cut = 1; cut <= CUTS; cut++) {
      const had = await ownedTasks(cutOff);
      const outputPartitions = had.filter((x) => x.startsWith('1_')).map((x) => Number(x.slice(2)));
      const marks = workers.map((w) => w.logs.length);
      for (const p of proxies) await p.cut();
      const cutAt = Date.now();
      // Cut for at least CUT_MS, and on until the output partitions of its tasks moved on
      // under their new owners (at most MAX_CUT_MS): the others do not wait for it.
      const moved = () => outputPartitions.filter((p) => (clock.last.get(p) ?? 0) > cutAt + SESSION_MS);
      let movedAt = 0;
      while (Date.now() - cutAt < MAX_CUT_MS) {
        if (movedAt === 0 && outputPartitions.length > 0 && moved().length === outputPartitions.length)
          movedAt = Date.now();
        if (Date.now() - cutAt >= CUT_MS && movedAt > 0) break;
        await sleep(200);
      }
      const takenOver = workers.some(
        (w, i) =>
          w !== cutOff &&
          w.logs.slice(marks[i]).some((l) => l.includes('"msg":"assignment"') && !l.includes('"added":[]')),
      );
      const movedNow = moved();
      for (const p of proxies) await p.heal();
      const healAt = Date.now();
      assert.ok(
        takenOver,
        `cut ${cut}: another worker took over the tasks of the cut-off one (${had.join(',')})`,
      );
      if (movedNow.length < outputPartitions.length)
        for (const [i, w] of workers.entries())
          t.diagnostic(
            `${w.name} since the cut: ${w.logs
              .slice(marks[i])
              .filter((l) => !l.includes('"component":"kafkajs"'))
              .map((l) => `${(JSON.parse(l) as { time: number }).time - cutAt} ms ${l.slice(0, 300)}`)
              .join('\n')}`,
          );
      assert.deepEqual(
        movedNow,
        outputPartitions,
        `cut ${cut}: output partitions ${outputPartitions.join(',')} of the cut-off worker went on while it was cut off`,
      );
      await group.step(`cut ${cut}: the cut-off worker rejoins with tasks`, async () => {
        for (;;) {
          assert.equal(cutOff.child.exitCode, null, 'the cut-off worker still runs');
          const owned = await ownedTasks(cutOff).catch(() => []);
          const s = await cutOff.status().catch(() => undefined);
          if (owned.length > 0 && s?.tasks.every((x: { state: string }) => x.state === 'running')) return;
          if (Date.now() - healAt > 90_000)
            throw new Error(`no tasks ${Date.now() - healAt} ms after the heal`);
          await sleep(500);
        }
      });
      events.push(
        `cut ${cut}: had ${had.join(',')}, its output moving again ${movedAt - cutAt} ms into the cut, healed at ${healAt - cutAt} ms, tasks back ${Date.now() - healAt} ms after the heal`,
      );
      await sleep(3000);
    }
    producing = false;
    await feeding;
    t.diagnostic(`${events.join('; ')}; ${gen.count} records`);
    const fenced = cutOff.logs.filter((l) => l.includes('task migrated')).length;
    t.diagnostic(`tasks of the cut-off worker closed as migrated (fenced): ${fenced}`);

    let out: ReadRecord[] = [];
    const t0 = Date.now();
    while (Date.now() - t0 < 180_000) {
      const java = await readCommittedWithJava(brokers().join(','), output, { withValues: true });
      out = java.map((r) => ({
        key: null,
        value: r.value,
        partition: r.partition,
        offset: String(r.offset),
        headers: r.headers,
      }));
      if (out.length >= gen.count) break;
      await sleep(3000);
    }
    if (out.length !== gen.count) {
      t.diagnostic(describeShortfall(out, gen.expected));
      for (const w of workers) {
        const own = w.logs.filter((l) => !l.includes('"component":"kafkajs"'));
        console.error(`--- ${w.name} ---\n${own.slice(-40).join('\n')}`);
      }
    }
    assertExactRunningSums(out, gen.expected);
    for (const w of workers) assert.equal(w.child.exitCode, null, `${w.name} still runs`);
  } finally {
    producing = false;
    await feeding.catch(() => undefined);
    await producer.disconnect().catch(() => undefined);
    await clock.stop().catch(() => undefined);
  }
});
