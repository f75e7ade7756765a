import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../../src/config/load.js';
import { ConfigError, SluiceError } from '../../../src/errors.js';
import type { Route } from '../../../src/ops/http-server.js';
import { threadConfig, threadStateDir } from '../../../src/runtime/threads/thread-config.js';
import { captureRoute, fromWireError, toWireError } from '../../../src/runtime/threads/thread-protocol.js';
import { mergeThreadStatus } from '../../../src/runtime/threads/thread-status.js';

test('processing.threads should default to 1 and reject 0, 65 and fractions, with every problem listed', () => {
  assert.equal(loadConfig({ env: {} }).processing.threads, 1);
  assert.equal(loadConfig({ env: { SLUICE_PROCESSING_THREADS: '4' } }).processing.threads, 4);
  for (const bad of ['0', '65', '1.5'])
    assert.throws(
      () =>
        loadConfig({ env: { SLUICE_PROCESSING_THREADS: bad, SLUICE_PROCESSING_COMMIT_INTERVAL_MS: '0' } }),
      (e: unknown) =>
        e instanceof ConfigError &&
        /processing\.threads/.test(e.message) &&
        /commitIntervalMs/.test(e.message),
    );
  // Thread i joins as <id>-t<i>: an id that fits alone may not fit with the suffix.
  const long = 'x'.repeat(247);
  assert.equal(
    loadConfig({ env: {}, overrides: { kafka: { groupInstanceId: long } } }).kafka.groupInstanceId,
    long,
  );
  assert.throws(
    () =>
      loadConfig({ env: {}, overrides: { kafka: { groupInstanceId: long }, processing: { threads: 2 } } }),
    /too long for 2 threads/,
  );
});

test('a stream thread’s config should give it its own state folder and instance id, a share of the memory bounds, and no HTTP server', () => {
  const c = loadConfig({
    env: {},
    overrides: {
      kafka: { groupInstanceId: 'pod-7' },
      processing: { threads: 3, asyncMaxBytes: 3000 },
      state: { dir: '/var/lib/s', cacheMaxBytes: 300, recordCacheMaxBytes: 90 },
    },
  });
  const [t0, t1, t2] = [0, 1, 2].map((i) => threadConfig(c, i, 3));
  assert.deepEqual(
    [t0!.state.dir, t1!.state.dir, t2!.state.dir],
    ['/var/lib/s', join('/var/lib/s', 'thread-1'), join('/var/lib/s', 'thread-2')],
  );
  assert.equal(threadStateDir('/d', 0), '/d');
  assert.deepEqual(
    [t0!.kafka.groupInstanceId, t1!.kafka.groupInstanceId, t2!.kafka.groupInstanceId],
    ['pod-7', 'pod-7-t1', 'pod-7-t2'],
  );
  for (const t of [t0!, t1!, t2!]) {
    assert.equal(t.state.cacheMaxBytes, 100);
    assert.equal(t.state.recordCacheMaxBytes, 30);
    assert.equal(t.processing.asyncMaxBytes, 1024, 'a share, but not below the schema minimum');
    assert.equal(t.http.enabled, false);
    assert.equal(t.processing.threads, 1, 'each thread is one worker');
    assert.equal(t.processing.guarantee, c.processing.guarantee);
  }
  // No configured id: each thread's state folder keeps one of its own (instance-id.ts).
  const d = threadConfig(loadConfig({ env: {} }), 1, 2);
  assert.equal(d.kafka.groupInstanceId, undefined);
});

test('the merged /status should list every thread’s tasks, sum operator counts, and be ready only when every thread is', () => {
  const doc = (member: string, tasks: Array<[string, number, number]>, ready: boolean, records: number) => ({
    app: 'a',
    state: 'running',
    worker: { memberId: member, http: `http://h/t/${member}` },
    readiness: ready ? { ready: true } : { ready: false, reason: 'restoring 0_1' },
    group: { state: 'Stable', members: [{ memberId: 'm0' }, { memberId: 'm1' }, { memberId: 'other' }] },
    tasks: tasks.map(([id, subtopology, partition]) => ({ id, subtopology, partition })),
    operators: [{ id: 0, name: 'src', records }],
    overload: { mode: 'backpressure' },
  });
  const merged = mergeThreadStatus([
    doc('m0', [['0_2', 0, 2]], true, 10),
    doc(
      'm1',
      [
        ['1_0', 1, 0],
        ['0_0', 0, 0],
      ],
      false,
      5,
    ),
  ]) as any;
  assert.deepEqual(
    merged.tasks.map((t: any) => t.id),
    ['0_0', '1_0', '0_2'],
  );
  assert.equal(merged.operators[0].records, 15);
  assert.deepEqual(merged.readiness, { ready: false, reason: 'thread 1: restoring 0_1' });
  assert.deepEqual(
    merged.group.members.map((m: any) => m.self),
    [true, true, false],
  );
  assert.deepEqual(
    merged.threads.map((t: any) => [t.thread, t.worker.memberId, t.tasks]),
    [
      [0, 'm0', ['0_2']],
      [1, 'm1', ['1_0', '0_0']],
    ],
  );
  assert.deepEqual(merged.overload, { mode: 'backpressure' }, "thread 0's sections");
  const one = doc('m0', [], true, 1);
  assert.equal(mergeThreadStatus([one]), one);
});

test('a route run for another thread should give back what it wrote, and 404 when no route takes the path', async () => {
  const routes: Route[] = [
    (req, res, url) => {
      if (url.pathname !== '/echo') return false;
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ q: url.searchParams.get('q'), by: req.headers['x-sluice-forwarded-by'] ?? null }),
      );
      return true;
    },
  ];
  const r = await captureRoute(routes, '/echo?q=1', { 'x-sluice-forwarded-by': 'm1' });
  assert.deepEqual(r, {
    status: 201,
    headers: { 'content-type': 'application/json' },
    body: '{"q":"1","by":"m1"}',
  });
  assert.equal((await captureRoute(routes, '/nope', {})).status, 404);
  // A path that a URL parser would read as `//host/echo` stays a path: no route takes it.
  assert.equal((await captureRoute(routes, '//x/echo?q=1', {})).status, 404);
});

test('an error from a thread should keep its message, and its code when it is a Sluice error', () => {
  const e = fromWireError(toWireError(new SluiceError('SLUICE_STATE_LOCKED', 'state folder /x is locked')));
  assert.ok(e instanceof SluiceError);
  assert.equal((e as SluiceError).code, 'SLUICE_STATE_LOCKED');
  assert.equal(e.message, 'state folder /x is locked');
  const plain = fromWireError(toWireError(new TypeError('boom')), 'thread 1: ');
  assert.ok(!(plain instanceof SluiceError));
  assert.equal(plain.message, 'thread 1: boom');
  assert.equal(fromWireError(toWireError('text')).message, 'text');
});
