import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { loadConfig } from '../../../src/config/load.js';
import { App, json, string } from '../../../src/index.js';
import { createLogger } from '../../../src/ops/logger.js';
import { createWorkerMetrics } from '../../../src/ops/metrics.js';
import { InputRateMeter } from '../../../src/runtime/input-rate.js';
import type { Task } from '../../../src/runtime/task.js';
import { TaskManager } from '../../../src/runtime/task-manager.js';
import { StateIoError } from '../../../src/state/errors.js';

/**
 * What the worker does with a batch that failed on Sluice's or the machine's side (issue 13.2):
 * the task manager resets the task (a new fence, state and offsets from the last checkpoint), or
 * fails the worker over on a full disk; never a dead letter.
 */
function manager() {
  const app = new App({ id: 'unit-tm' });
  app.stream('orders', { key: string(), value: json<unknown>() }).to('out');
  const topology = app.topology();
  const metrics = createWorkerMetrics(new Registry());
  const fences: number[] = [];
  const failedOver: unknown[] = [];
  const client = {
    transactionalProducer: async () => {
      fences.push(Date.now());
      return {
        async commitTransaction() {
          return new Map();
        },
        async close() {},
      };
    },
    admin: async () => ({
      committedOffsets: async () => [],
      offsets: async () => [{ partition: 0, low: '0', high: '0' }],
    }),
  } as any;
  const m = new TaskManager({
    appId: 'unit-tm',
    topology,
    config: loadConfig({ overrides: { kafka: { brokers: ['127.0.0.1:1'] } }, env: {} }),
    client,
    logger: createLogger({ level: 'silent', format: 'json' }),
    metrics,
    isRunning: () => true,
    openState: async () => undefined,
    plainProducer: async () => {
      throw new Error('not at-least-once');
    },
    consumer: () => ({ seek() {}, requestRejoin() {}, commitOffsets: async () => undefined }) as any,
    opCounts: new Float64Array(16),
    lag: new Map(),
    inputRate: new InputRateMeter(metrics, 'unit-tm'),
    taskFailed: () => undefined,
    failOverOnFullDisk: (_t: Task, e: unknown) => {
      if (!(e instanceof StateIoError && e.diskFull)) return false;
      failedOver.push(e);
      return true;
    },
  });
  return { m, fences, failedOver, metrics };
}

test('a batch that failed with a StateIoError should reset the task; a full disk should fail the worker over instead', async () => {
  const { m, fences, failedOver, metrics } = manager();
  await m.onAssignment([{ topic: 'orders', partition: 0 }]);
  const task = m.tasks.get('0_0')!;
  await task.whenReady();
  assert.equal(task.state, 'running');
  assert.equal(fences.length, 1);

  m.processingFailed(task, new StateIoError('/state', 'read', 'state I/O error during read: EIO'));
  assert.equal(task.state, 'restoring', 'the task leaves running at once: no batch meets it meanwhile');
  await task.whenReady();
  assert.equal(task.state, 'running');
  assert.equal(fences.length, 2, 'rebuilt with a new fence');
  const kind = (k: string) => async () =>
    (await metrics.errors.get()).values.find((v) => v.labels.kind === k)?.value ?? 0;
  assert.equal(await kind('processing')(), 1);

  m.processingFailed(task, new StateIoError('/state', 'read', 'disk full', { diskFull: true }));
  assert.equal(failedOver.length, 1, 'a full disk fails the worker over');
  assert.equal(task.state, 'running', 'and does not reset the task');
  await m.closeAll({ checkpoint: false });
});
