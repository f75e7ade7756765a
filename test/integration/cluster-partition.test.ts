import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fileProxiedCluster } from '../helpers/cluster.js';
import { jobTopics, partitionArrivals, testKafka, withAdmin } from '../helpers/kafka.js';
import { assertExactOutput, RunningSumInput } from '../helpers/running-sum.js';
import {
  addsTasks,
  exactlyOnceArgs,
  ownedTasks,
  spawnWorkers,
  waitForStableGroup,
  workerGroup,
} from '../helpers/workers.js';

/**
 * A network partition on a 3-node cluster: of 3 workers (running sum, exactly-once), one reaches
 * the brokers only through TCP proxies of the test's (a second listener on every broker advertises
 * the proxies' ports, so metadata never hands it the brokers' own addresses). Once the group is
 * settled, the proxies are cut (connections reset, new ones refused) for longer than the session
 * timeout, then healed, TEST_PARTITION_CUTS times (default 1; the long run in test/cluster-faults
 * cuts 3 times). The cut-off worker must not stop the others (its tasks move to them and their
 * output goes on), must come back by itself after each heal (tasks again), and the output, read by
 * Kafka's own console consumer (read_committed), must be exact.
 *
 * Each cut waits for a settled group (Stable, every task running, no assignment for 4 s). The
 * test used to cut 3 s after the cut-off worker had "its tasks back", which it reports at once
 * after a heal (it has not yet learnt it lost them): the next cut came while it rejoined, and a
 * member cut off while the group waits for it to rejoin is dropped at the rebalance timeout
 * (60 s), not at its session timeout; the most likely cause of the CI failure of cut 3 ("another
 * worker took over ...", no takeover within 60 s). The rejoin is now a new assignment of its own.
 */
const CUTS = Number(process.env.TEST_PARTITION_CUTS ?? 1);
const SESSION_MS = 6000;
const CUT_MS = SESSION_MS + 9000;
const MAX_CUT_MS = 60_000;
const PARTITIONS = 6;
const KEYS = 500;
const RATE = 500; // records a second

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const proxied = fileProxiedCluster();

test('a worker cut off from the brokers past its session should lose its tasks without stopping the others, rejoin by itself, and leave the output exact', {
  timeout: 300_000 + CUTS * 150_000,
}, async (t) => {
  const { proxies, proxiedBrokers } = proxied();
  const { id, input, output, env } = await jobTopics('t-partition', PARTITIONS);
  const group = workerGroup(t, id);
  const workers = spawnWorkers(group, 3, {
    prefix: 'partition',
    env,
    args: exactlyOnceArgs(SESSION_MS),
    // w2 knows the brokers only by their proxies.
    envOf: (i) => (i === 2 ? { ...env, KAFKA_BROKERS: proxiedBrokers.join(',') } : env),
  });
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
  const clock = await partitionArrivals(output);
  const events: string[] = [];
  try {
    for (let cut = 1; cut <= CUTS; cut++) {
      const settled = await group.step(`cut ${cut}: the group is settled`, () =>
        waitForStableGroup(id, workers),
      );
      t.diagnostic(`cut ${cut}: settling: ${settled}`);
      if (cut === 1)
        assert.ok(
          proxies.reduce((n, p) => n + p.accepted, 0) > 0,
          'the cut-off worker connects through the proxies',
        );
      const had = await ownedTasks(cutOff);
      const outputPartitions = had.filter((x) => x.startsWith('1_')).map((x) => Number(x.slice(2)));
      const marks = workers.map((w) => w.logMark());
      for (const p of proxies) await p.cut();
      const cutAt = Date.now();
      const takenOverAt = () =>
        workers.some((w, i) => w !== cutOff && w.logsSince(marks[i]!).some(addsTasks));
      // Cut for at least CUT_MS, and on until the output partitions of its tasks moved on
      // under their new owners (at most MAX_CUT_MS): the others do not wait for it.
      const moved = () => outputPartitions.filter((p) => clock.last(p) > cutAt + SESSION_MS);
      let movedAt = 0;
      let tookOverAt = 0;
      while (Date.now() - cutAt < MAX_CUT_MS) {
        if (tookOverAt === 0 && takenOverAt()) tookOverAt = Date.now();
        if (movedAt === 0 && outputPartitions.length > 0 && moved().length === outputPartitions.length)
          movedAt = Date.now();
        if (Date.now() - cutAt >= CUT_MS && movedAt > 0) break;
        await sleep(200);
      }
      const movedNow = moved();
      const groupAtHeal = await withAdmin(async (a) => (await a.describeGroups([id])).groups[0]?.state).catch(
        (e: Error) => e.message,
      );
      for (const p of proxies) await p.heal();
      const healAt = Date.now();
      if (tookOverAt === 0 || movedNow.length < outputPartitions.length) {
        t.diagnostic(`cut ${cut}: before it ${settled}; at the heal the group was ${groupAtHeal}`);
        for (const [i, w] of workers.entries())
          t.diagnostic(
            `${w.name} since the cut: ${w
              .logsSince(marks[i]!)
              .filter((l) => !l.includes('"component":"kafkajs"'))
              .map((l) => `${(JSON.parse(l) as { time: number }).time - cutAt} ms ${l.slice(0, 300)}`)
              .join('\n')}`,
          );
      }
      assert.ok(
        tookOverAt > 0,
        `cut ${cut}: another worker took over the tasks of the cut-off one (${had.join(',')})`,
      );
      assert.deepEqual(
        movedNow,
        outputPartitions,
        `cut ${cut}: output partitions ${outputPartitions.join(',')} of the cut-off worker went on while it was cut off`,
      );
      // It rejoins by itself: a new assignment of its own (while cut off it could get none),
      // then every task it was given running.
      await group.step(`cut ${cut}: the cut-off worker rejoins with tasks`, async () => {
        for (;;) {
          assert.equal(cutOff.child.exitCode, null, 'the cut-off worker still runs');
          const rejoined = cutOff.logsSince(marks[2]!).some((l) => l.includes('"msg":"assignment"'));
          const s = rejoined ? await cutOff.status().catch(() => undefined) : undefined;
          if (s?.tasks.length > 0 && s.tasks.every((x: { state: string }) => x.state === 'running')) return;
          if (Date.now() - healAt > 90_000)
            throw new Error(`no tasks ${Date.now() - healAt} ms after the heal`);
          await sleep(500);
        }
      });
      events.push(
        `cut ${cut}: had ${had.join(',')}, taken over ${tookOverAt - cutAt} ms and its output moving again ${movedAt - cutAt} ms into the cut, healed at ${healAt - cutAt} ms, tasks back ${Date.now() - healAt} ms after the heal`,
      );
    }
    await sleep(3000);
    producing = false;
    await feeding;
    t.diagnostic(`${events.join('; ')}; ${gen.count} records`);
    // What went wrong on the way, for the record: each worker's warnings and errors by message.
    for (const w of workers) {
      const byMsg = new Map<string, number>();
      for (const l of w.logs)
        if (/"level":(40|50)/.test(l) && !l.includes('"component":"kafkajs"')) {
          const m = /"msg":"([^"]*)"/.exec(l)?.[1] ?? '?';
          byMsg.set(m, (byMsg.get(m) ?? 0) + 1);
        }
      t.diagnostic(`${w.name} warnings: ${[...byMsg].map(([m, n]) => `${n}× ${m}`).join('; ') || 'none'}`);
      // kafkajs's own: a position out of the log's range moves it (kafkajs-offset-reset.ts).
      const resets = w.logs.filter((l) => l.includes('Offset out of range'));
      if (resets.length > 0)
        t.diagnostic(`${w.name} out-of-range resets: ${resets.join(' | ').slice(0, 2000)}`);
    }
    const fenced = cutOff.logs.filter((l) => l.includes('task migrated')).length;
    t.diagnostic(`tasks of the cut-off worker closed as migrated (fenced): ${fenced}`);
    await assertExactOutput(t, {
      output,
      input: gen,
      workers,
      group: id,
      inputTopic: input,
      timeoutMs: 180_000,
    });
    for (const w of workers) assert.equal(w.child.exitCode, null, `${w.name} still runs`);
  } finally {
    producing = false;
    await feeding.catch(() => undefined);
    await producer.disconnect().catch(() => undefined);
    await clock.stop().catch(() => undefined);
  }
});
