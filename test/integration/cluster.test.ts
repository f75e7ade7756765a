import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { fileCluster } from '../helpers/cluster.js';
import { eventually, jobTopics, produce, readAll, withAdmin } from '../helpers/kafka.js';
import { assertExactRunningSums, RunningSumInput } from '../helpers/running-sum.js';
import { SLUICE_BIN, spawnWorker, workerGroup } from '../helpers/workers.js';

/*
 * A local 3-node cluster (`startLocalKafka({ brokers: 3 })`) of this file's own: Kafka's internal
 * topics and Sluice's are replicated on all three nodes, `kafka.replicationFactor` overrides that,
 * and `sluice kafka status` lists every node.
 */
const cluster = fileCluster();

/** Replica and ISR counts of every partition of `topics`. */
async function replication(topics: string[]): Promise<Map<string, Array<{ replicas: number; isr: number }>>> {
  return withAdmin(async (a) => {
    const md = await a.fetchTopicMetadata({ topics });
    return new Map(
      md.topics.map((t) => [
        t.name,
        t.partitions.map((p) => ({ replicas: p.replicas.length, isr: p.isr.length })),
      ]),
    );
  });
}

/** Runs the running-sum job on `records` records until its output is exact; returns its app id. */
async function runJob(t: Parameters<typeof workerGroup>[0], prefix: string, args: string[]): Promise<string> {
  const { id, input, output, env } = await jobTopics(prefix, 3);
  const group = workerGroup(t, id);
  const gen = new RunningSumInput({ seed: 7, keys: 20 });
  group.add(spawnWorker('running-sum', { env, args: ['--processing.guarantee', 'exactly_once', ...args] }));
  await produce(input, gen.next(300));
  const out = await readAll(output, { expected: 300, timeoutMs: 90_000 });
  assertExactRunningSums(out, gen.expected);
  return id;
}

test('internal topics of Kafka and of a job should have 3 in-sync replicas on a 3-node cluster', {
  timeout: 180_000,
}, async (t) => {
  const id = await runJob(t, 't-cluster-rf', []);
  const own = await withAdmin(async (a) => (await a.listTopics()).filter((n) => n.startsWith(id)));
  for (const suffix of ['-repartition', '-changelog', '-dlq', '-topology', '-in', '-out'])
    assert.ok(
      own.some((n) => n.endsWith(suffix)),
      `a topic ending in ${suffix} (have ${own.join(', ')})`,
    );
  const internal = [...own, '__transaction_state', '__consumer_offsets'];
  const rep = await eventually<Map<string, Array<{ replicas: number; isr: number }>> | undefined>(
    async () => {
      const r = await replication(internal);
      return [...r.values()].every((ps) => ps.every((p) => p.isr === 3)) ? r : undefined;
    },
    { timeoutMs: 30_000, what: 'every replica in sync' },
  );
  assert.ok(rep);
  for (const topic of internal) {
    const parts = rep.get(topic);
    assert.ok(parts && parts.length > 0, `${topic} exists (have ${[...rep.keys()].join(', ')})`);
    for (const p of parts) assert.deepEqual(p, { replicas: 3, isr: 3 }, topic);
  }
});

test('kafka.replicationFactor should set the copies of the internal topics a worker creates', {
  timeout: 180_000,
}, async (t) => {
  const id = await runJob(t, 't-cluster-rf2', ['--kafka.replicationFactor', '2']);
  const own = await withAdmin(async (a) =>
    (await a.listTopics()).filter((n) => n.startsWith(id) && !n.endsWith('-in') && !n.endsWith('-out')),
  );
  const rep = await replication(own);
  assert.equal(rep.size, 4, `repartition, changelog, DLQ, topology: ${own.join(', ')}`);
  for (const [topic, parts] of rep) for (const p of parts) assert.equal(p.replicas, 2, topic);
});

test('sluice kafka status should list every node of the cluster, and stop one node with stopLocalKafka({ node })', {
  timeout: 120_000,
}, async () => {
  const status = async () => {
    const env = { ...process.env };
    delete env.KAFKA_BROKERS;
    const child = spawn(
      process.execPath,
      [SLUICE_BIN, 'kafka', 'status', '--port', String(cluster().port), '--data-dir', cluster().dataDir],
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const code = await new Promise<number | null>((r) => child.once('close', r));
    return { code, out };
  };
  const up = await status();
  assert.equal(up.code, 0, up.out);
  for (let id = 1; id <= 3; id++)
    assert.match(up.out, new RegExp(`node ${id} at ${cluster().address(id)}: pid ${cluster().pid(id)}`));
  assert.match(up.out, /cluster of 3 running/);
  const { stopLocalKafka } = await import('../../src/dev/local-kafka.js');
  assert.equal(await stopLocalKafka({ port: cluster().port, dataDir: cluster().dataDir, node: 3 }), true);
  const down = await status();
  assert.equal(down.code, 3, down.out);
  assert.match(down.out, /node 3 at \S+: not running/);
  assert.match(down.out, /2 of 3 nodes running/);
  // A start finds nodes 1 and 2 running and starts node 3 alone.
  const k = await cluster().restart();
  assert.equal(k.alreadyRunning, false);
  assert.equal(k.nodes.filter((n) => n.pid > 0).length, 3);
  assert.equal((await status()).code, 0);
});
