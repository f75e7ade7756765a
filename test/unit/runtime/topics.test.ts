import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SluiceError } from '../../../src/errors.js';
import { App, json } from '../../../src/index.js';
import type { KafkaAdmin } from '../../../src/kafka/admin.js';
import type { TopicSpec } from '../../../src/kafka/types.js';
import { prepareTopics } from '../../../src/runtime/topics.js';

/**
 * A KafkaAdmin that knows only `partitionCounts`, `ensureTopics`, `brokerCount` (one broker) and
 * `listTopics` (for the suggestions of a missing topic), the calls prepareTopics makes: `topics` is the cluster (name → partition count), and every created topic is recorded.
 */
function fakeAdmin(topics: Record<string, number>) {
  const cluster = new Map(Object.entries(topics));
  const created: TopicSpec[] = [];
  const admin = {
    async listTopics() {
      return [...cluster.keys()];
    },
    async brokerCount() {
      return 1;
    },
    async partitionCounts(names: readonly string[]) {
      const out = new Map<string, number>();
      for (const n of names) if (cluster.has(n)) out.set(n, cluster.get(n)!);
      return out;
    },
    async ensureTopics(specs: readonly TopicSpec[]) {
      const missing = specs.filter((s) => !cluster.has(s.topic));
      for (const s of missing) {
        cluster.set(s.topic, s.partitions);
        created.push(s);
      }
      return missing.map((s) => s.topic);
    },
  } as unknown as KafkaAdmin;
  return { admin, created, cluster };
}

/** orders → keyBy(user) → count → counts: two sub-topologies, one repartition topic, one store. */
function shop() {
  const app = new App({ id: 'shop' });
  app
    .stream('orders', { value: json<{ user: string }>() })
    .keyBy((o) => o.user, { name: 'by-user' })
    .count({ name: 'per-user' })
    .to('counts');
  return app.topology();
}

test("prepareTopics should give the repartition topic its writer's partition count and create compacted changelogs with one partition per task", async () => {
  const { admin, created } = fakeAdmin({ orders: 6, counts: 2 });
  const plan = await prepareTopics(admin, shop());
  assert.deepEqual(
    [...plan],
    [
      [0, 6],
      [1, 6],
    ],
  );
  const byName = new Map(created.map((s) => [s.topic, s]));
  assert.equal(byName.get('shop-by-user-repartition')?.partitions, 6, "repartition = the source's count");
  // Records there carry event time: time retention would delete a backfill's before they are read.
  assert.equal(byName.get('shop-by-user-repartition')?.config?.['retention.ms'], '-1');
  const changelog = byName.get('shop-per-user-agg-changelog');
  assert.ok(changelog, `changelog created (created: ${[...byName.keys()].join(', ')})`);
  assert.equal(changelog.partitions, 6, 'one changelog partition per task');
  assert.equal(changelog.config?.['cleanup.policy'], 'compact');
  assert.ok(byName.has('shop-dlq'), 'the dead-letter topic too');
  // Its retention counts from the failure, not from the record's (event) time.
  assert.equal(byName.get('shop-dlq')?.config?.['message.timestamp.type'], 'LogAppendTime');
  // The output topic is the user's: never created nor resized.
  assert.ok(!byName.has('counts'));
});

test('prepareTopics should refuse inputs of one sub-topology that are not co-partitioned, naming each topic=count', async () => {
  const app = new App({ id: 'm' });
  app.stream('a').merge(app.stream('b')).to('c');
  const { admin, created } = fakeAdmin({ a: 4, b: 2, c: 1 });
  await assert.rejects(prepareTopics(admin, app.topology()), (e: unknown) => {
    assert.ok(e instanceof SluiceError);
    assert.equal(e.code, 'SLUICE_NOT_COPARTITIONED');
    assert.match(e.message, /must be co-partitioned/);
    assert.match(e.message, /\ba=4\b/);
    assert.match(e.message, /\bb=2\b/);
    return true;
  });
  assert.equal(created.length, 0, 'nothing created on a refused topology');
});

test('prepareTopics should refuse an existing internal topic with the wrong partition count', async () => {
  const { admin } = fakeAdmin({ orders: 6, counts: 2, 'shop-by-user-repartition': 4 });
  await assert.rejects(prepareTopics(admin, shop()), (e: unknown) => {
    assert.ok(e instanceof SluiceError);
    assert.equal(e.code, 'SLUICE_NOT_COPARTITIONED');
    assert.match(e.message, /shop-by-user-repartition has 4 partitions but needs 6/);
    return true;
  });
});

test('prepareTopics should name the missing topics and the command that creates them', async () => {
  const { admin, created } = fakeAdmin({ counts: 2 });
  await assert.rejects(prepareTopics(admin, shop()), (e: unknown) => {
    assert.ok(e instanceof SluiceError);
    assert.match(e.message, /topics missing on the cluster: orders\./);
    assert.match(e.message, /npx sluice topics create orders --partitions 4/);
    return true;
  });
  const none = fakeAdmin({});
  await assert.rejects(
    prepareTopics(none.admin, shop()),
    /missing on the cluster: orders, counts\. .*npx sluice topics create orders counts/,
  );
  assert.equal(created.length + none.created.length, 0);
  const typo = fakeAdmin({ oders: 4, counts: 2 });
  await assert.rejects(
    prepareTopics(typo.admin, shop()),
    /missing on the cluster: orders \(did you mean "oders"\?\)\. .*topics create orders /,
  );
});

test('prepareTopics should replicate internal topics kafka.replicationFactor times, else min(3, live brokers)', async () => {
  for (const [brokers, configured, want] of [
    [1, undefined, 1],
    [2, undefined, 2],
    [3, undefined, 3],
    [5, undefined, 3],
    [5, 2, 2],
    [1, 3, 3],
  ] as const) {
    const { admin, created } = fakeAdmin({ orders: 6, counts: 2 });
    (admin as unknown as { brokerCount: () => Promise<number> }).brokerCount = async () => brokers;
    await prepareTopics(admin, shop(), { replicationFactor: configured });
    assert.ok(created.length >= 4, 'repartition, changelog, DLQ and topology topics');
    for (const s of created)
      assert.equal(s.replicationFactor, want, `${s.topic} with ${brokers} brokers, configured ${configured}`);
  }
});
