import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { loadConfig } from '../../../src/config/load.js';
import { createLogger } from '../../../src/ops/logger.js';
import { createWorkerMetrics } from '../../../src/ops/metrics.js';
import { Task, type TaskDeps } from '../../../src/runtime/task.js';
import { ordersJoinUsers } from '../../helpers/apps.js';

/**
 * A task with two inputs (a stream joined with a table) and a fake transactional producer whose
 * commit the test holds open: kafkajs runs partitions concurrently, so a batch of one input can
 * be processed while the checkpoint of the other is in flight.
 */
test('a checkpoint should keep the offsets and records processed while it was in flight for the next one', async () => {
  const sub = ordersJoinUsers('unit-task');
  const commits: Array<{ records: number; offsets: Array<{ topic: string; offset: string }> }> = [];
  let release: (e?: Error) => void = () => undefined;
  let begins = 0;
  const producer = {
    begin() {
      begins++;
    },
    async commitTransaction(
      records: Map<string, unknown[]>,
      o: { offsets: Array<{ topic: string; offset: string }> },
    ) {
      const n = records.get('out')?.length ?? 0;
      commits.push({ records: n, offsets: o.offsets.map(({ topic, offset }) => ({ topic, offset })) });
      await new Promise<void>((r, j) => {
        release = (e) => (e ? j(e) : r());
      });
      return new Map();
    },
    async close() {},
  };
  const config = loadConfig({ overrides: { kafka: { brokers: ['127.0.0.1:1'] } }, env: {} });
  const deps: TaskDeps = {
    appId: 'unit-task',
    groupId: 'unit-task',
    config,
    client: {
      transactionalProducer: async () => producer,
      admin: async () => ({
        committedOffsetsStable: async () => [],
        offsets: async () => [{ partition: 0, low: '0', high: '0' }],
      }),
    } as any,
    logger: createLogger({ level: 'silent', format: 'json' }),
    metrics: createWorkerMetrics(new Registry()),
    plainProducer: async () => {
      throw new Error('not at-least-once');
    },
    openState: async () => memoryState(),
    seek: () => undefined,
    deadLetterTopic: 'unit-task-dlq',
  };
  const task = new Task('0_0', sub, 0, deps);
  await task.init();
  const rec = (offset: number, key: string, value: unknown) => ({
    key: Buffer.from(key),
    value: Buffer.from(JSON.stringify(value)),
    offset: String(offset),
    timestamp: '1000',
  });
  task.process('orders', [rec(0, 'a', { n: 1 }), rec(1, 'a', { n: 2 })], () => undefined);
  assert.equal(begins, 1, 'records processed: their transaction may begin (the producer decides)');
  task.process('orders', [], () => undefined);
  assert.equal(begins, 1, 'an empty batch begins nothing');
  const first = task.checkpoint();
  // The table's batch arrives while the first checkpoint waits for its commit.
  task.process('users', [rec(0, 'a', { name: 'Ann' })], () => undefined);
  task.process('orders', [rec(2, 'a', { n: 3 })], () => undefined);
  release();
  await first;
  assert.deepEqual(commits[0], { records: 2, offsets: [{ topic: 'orders', offset: '2' }] });
  assert.ok(task.hasPending, 'what came during the commit is still to be committed');
  const second = task.checkpoint();
  release();
  await second;
  assert.deepEqual(commits[1]!.records, 1);
  assert.deepEqual(
    commits[1]!.offsets.sort((a, b) => a.topic.localeCompare(b.topic)),
    [
      { topic: 'orders', offset: '3' },
      { topic: 'users', offset: '1' },
    ],
    'both inputs committed to their ends',
  );
  assert.equal(task.hasPending, false);

  // A checkpoint that fails rejects for its caller only: a batch waiting for it goes on.
  task.process('orders', [rec(3, 'a', { n: 4 })], () => undefined);
  const third = task.checkpoint();
  const waiting = task.idle();
  release(new Error('coordinator lost'));
  await assert.rejects(third, /coordinator lost/);
  await waiting;
  await task.close({ checkpoint: false });
});

/** An in-memory TaskState: values by (store, key); counts writes like the RocksDB one. */
function memoryState() {
  const values = new Map<string, unknown>();
  let writes = 0;
  let snapshot = 0;
  return {
    get dirty() {
      return writes > 0;
    },
    processOp(node: any, down: any, rc: any, _c: any, late: any) {
      const { processor, sides } = node.spec;
      const ctx: any = {
        state: {
          row: {
            get: () => values.get(String(ctx.key)),
            set: (v: unknown) => {
              values.set(String(ctx.key), v);
              writes++;
            },
            clear: () => {
              values.delete(String(ctx.key));
              writes++;
            },
          },
        },
        key: null,
        get timestamp() {
          return rc.timestamp;
        },
        emit: (v: unknown) => down.push(ctx.key, v),
        late: (v: unknown) => late?.push(ctx.key, v),
      };
      void processor;
      return {
        push() {},
        side(i: number, k: unknown, v: unknown) {
          ctx.key = k;
          if (i === 0) sides.onLeft(v, ctx);
          else sides.onRight(v, ctx);
        },
      };
    },
    writeChangelog() {
      snapshot = writes;
    },
    async commitLocal() {
      writes -= snapshot;
    },
    advanceTime: () => 0,
    flushCacheMetrics() {},
    async close() {},
  };
}
