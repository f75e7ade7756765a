import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { GroupDescription, KafkaAdmin } from '../../../src/kafka/admin.js';
import { GroupView, snapshotOf } from '../../../src/ops/group-view.js';
import type { Topology } from '../../../src/topology/build.js';

const layout = { subtopologyOf: (t: string) => ({ in: 0, rep: 1 })[t] } as unknown as Topology;

function description(): GroupDescription {
  return {
    state: 'Stable',
    protocol: 'SluiceTaskAssigner',
    members: [
      {
        memberId: 'm-b',
        clientId: 'c',
        host: '/10.0.0.2',
        info: { tasks: [], http: 'http://b:9464' },
        assignment: { in: [1], rep: [1] },
      },
      {
        memberId: 'm-a',
        clientId: 'c',
        host: '/10.0.0.1',
        info: { tasks: ['0_0'], http: 'http://a:9464' },
        assignment: { in: [0], rep: [0], other: [0] },
      },
    ],
  };
}

test('snapshotOf should map each member assignment to task ids and owners, with its HTTP address', () => {
  const s = snapshotOf(description(), layout);
  assert.equal(s.state, 'Stable');
  assert.deepEqual(
    s.members.map((m) => [m.memberId, m.http, m.tasks]),
    [
      ['m-a', 'http://a:9464', ['0_0', '1_0']],
      ['m-b', 'http://b:9464', ['0_1', '1_1']],
    ],
  );
  assert.equal(s.owners.get('1_1'), 'm-b');
  assert.equal(s.owners.get('1_0'), 'm-a');
});

test('GroupView should ask the coordinator at most once a second unless invalidated, sharing one request', async () => {
  let calls = 0;
  const admin = {
    describeGroupMembers: async () => {
      calls++;
      await new Promise((r) => setTimeout(r, 20));
      return description();
    },
  } as unknown as KafkaAdmin;
  const view = new GroupView(async () => admin, 'g', layout);
  assert.equal(view.current.state, 'unknown', 'nothing read yet');
  const [a, b] = await Promise.all([view.get(), view.get()]);
  assert.equal(a, b);
  assert.equal(calls, 1, 'the background refresh and both gets share one request');
  await view.get();
  assert.equal(view.current.members.length, 2);
  assert.equal(calls, 1, 'cached within a second');
  view.invalidate();
  await view.get();
  assert.equal(calls, 2, 'a rebalance invalidates the cache');
});

test('GroupView should keep the last snapshot and report the error when the coordinator fails', async () => {
  let fail = false;
  const admin = {
    describeGroupMembers: async () => {
      if (fail) throw new Error('coordinator gone');
      return description();
    },
  } as unknown as KafkaAdmin;
  const view = new GroupView(async () => admin, 'g', layout);
  await view.get();
  fail = true;
  view.invalidate();
  const s = await view.get();
  assert.equal(s.error, 'coordinator gone');
  assert.equal(s.members.length, 2);
});

test('GroupView should not ask the coordinator once closed', async () => {
  let calls = 0;
  const admin = {
    describeGroupMembers: async () => {
      calls++;
      return description();
    },
  } as unknown as KafkaAdmin;
  const view = new GroupView(async () => admin, 'g', layout);
  await view.get();
  view.close();
  view.invalidate();
  await view.get();
  void view.current;
  assert.equal(calls, 1);
});

test('GroupView should not ask the coordinator before it is enabled (the worker joined)', async () => {
  let calls = 0;
  let joined = false;
  const admin = {
    describeGroupMembers: async () => {
      calls++;
      return description();
    },
  } as unknown as KafkaAdmin;
  const view = new GroupView(
    async () => admin,
    'g',
    layout,
    () => joined,
  );
  void view.current;
  assert.equal((await view.get()).state, 'unknown');
  assert.equal(calls, 0);
  joined = true;
  assert.equal((await view.get()).state, 'Stable');
  assert.equal(calls, 1);
});

test('GroupView.firstRead should wait for the first answer (bounded), and not at all once read', async () => {
  let release: () => void = () => undefined;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  const admin = {
    describeGroupMembers: async () => {
      await gate;
      return description();
    },
  } as unknown as KafkaAdmin;
  const view = new GroupView(async () => admin, 'g', layout);
  assert.equal(view.current.members.length, 0, 'before any answer: the empty snapshot');
  const t0 = Date.now();
  await view.firstRead(50);
  assert.ok(Date.now() - t0 < 1000, 'bounded by its timeout');
  assert.equal(view.current.members.length, 0, 'no answer yet');
  setTimeout(release, 20);
  await view.firstRead(5000);
  assert.equal(view.current.members.length, 2, 'the first read is in');
  const t1 = Date.now();
  await view.firstRead(5000);
  assert.ok(Date.now() - t1 < 50, 'once read, no wait');
  const off = new GroupView(
    async () => admin,
    'g',
    layout,
    () => false,
  );
  await off.firstRead(5000);
  assert.equal(off.current.state, 'unknown', 'not joined: nothing asked, no wait');
});
