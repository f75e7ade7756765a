/**
 * A state read that fails is Sluice's or the machine's fault, not the user's (issue 13.2): the
 * batch must fail without committing, the task reset to its last checkpoint and the records
 * processed again, and no good record may go to the dead-letter topic. The fault is injected
 * into the task's RocksDB store (its first read of one key on the processing thread throws a
 * StateIoError, as an I/O error would); the reset reopens the store, so the retry reads for real.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { json, string, valueState } from 'sluice';
import type { RocksTaskState } from '../../src/runtime/rocks-task-state.js';
import { StateIoError } from '../../src/state/errors.js';
import { eventually, produce, readAll } from '../helpers/kafka.js';
import { inProcessApp, metricSum } from '../helpers/workers.js';

test('a state read that fails should reset the task and reprocess its records, with exact output and no dead letter', {
  timeout: 120_000,
}, async (t) => {
  const { id, input, output, app, start } = await inProcessApp(t, 't-state-fault', 1);
  app
    .stream(input, { key: string(), value: json<{ k: string; seq: number }>() })
    .byKey()
    .process(
      {
        state: { n: valueState<number>() },
        onRecord(r, ctx) {
          const n = (ctx.state.n.get() ?? 0) + 1;
          ctx.state.n.set(n);
          ctx.emit({ k: r.k, n, seq: r.seq });
        },
      },
      { name: 'count' },
    )
    .to(output);
  const w = await start('silent');
  const worker = w.worker;
  await eventually(async () => worker.readiness().ready, { timeoutMs: 60_000, what: 'worker ready' });
  const rocks = (worker.tasks.get('0_0')!.stateStore as RocksTaskState).rocks;
  // The first read on the processing thread that asks for k3 fails: a record's own read
  // (getSync) or the read-ahead of its batch's first slice (getManySync). The read-ahead on the
  // libuv pool is a hint whose failure is ignored (the records read their keys themselves): it
  // fails every time here, so k3 is read on the processing thread.
  const real = rocks.getSync.bind(rocks);
  const realMany = rocks.getManySync.bind(rocks);
  let injected = 0;
  const fault = (keys: Buffer[]) => {
    if (injected === 0 && keys.some((k) => k.toString() === 'k3')) {
      injected++;
      throw new StateIoError('/state', 'read', 'state I/O error in /state during read: EIO (injected)');
    }
  };
  rocks.getSync = (store, key) => {
    fault([key]);
    return real(store, key);
  };
  rocks.getManySync = (store, keys) => {
    fault(keys);
    return realMany(store, keys);
  };
  rocks.getManyAsync = async () => {
    throw new StateIoError('/state', 'read', 'state I/O error in /state during read: EIO (injected)');
  };
  const N = 50;
  await produce(
    input,
    Array.from({ length: N }, (_, i) => ({
      key: `k${i % 5}`,
      value: JSON.stringify({ k: `k${i % 5}`, seq: i }),
    })),
  );
  const out = await readAll(output, { expected: N, settleMs: 2000 });
  assert.equal(injected, 1, 'the fault was met');
  const bySeq = new Map(
    out.map((r) => [JSON.parse(r.value!).seq as number, JSON.parse(r.value!).n as number]),
  );
  assert.equal(out.length, N, 'every record out once (read_committed)');
  for (let i = 0; i < N; i++)
    assert.equal(bySeq.get(i), Math.floor(i / 5) + 1, `seq ${i}: its key's exact count`);
  const dlq = await readAll(`${id}-dlq`, { timeoutMs: 3000, settleMs: 1000 });
  assert.equal(dlq.length, 0, 'no dead letter for a good record');
  const metrics = await w.registry.metrics();
  assert.equal(metricSum(metrics, 'sluice_errors_total', { app: id, kind: 'processing' }), 1);
});
