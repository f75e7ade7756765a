import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cacheCoordinators } from '../../../src/kafka/coordinator-cache.js';

/** A cluster whose coordinator lookups are counted; `node` is the coordinator it names. */
function fakeCluster() {
  const c = {
    lookups: 0,
    calls: 0,
    node: 1,
    async findGroupCoordinator({ groupId }: { groupId: string; coordinatorType?: number }) {
      c.lookups++;
      const nodeId = c.node;
      return {
        nodeId,
        groupId,
        async endTxn() {
          if (nodeId !== c.node)
            throw Object.assign(new Error('not coordinator'), { type: 'NOT_COORDINATOR' });
          return nodeId;
        },
        addOffsetsToTxn() {
          throw new Error('thrown at once');
        },
        async addPartitionsToTxn() {
          c.calls++;
          throw Object.assign(new Error('concurrent'), { type: 'CONCURRENT_TRANSACTIONS', code: 51 });
        },
        async txnOffsetCommit() {
          c.calls++;
          throw Object.assign(new Error('timed out'), { type: 'REQUEST_TIMED_OUT' });
        },
      };
    },
  };
  return c;
}

test('a coordinator is looked up once and reused until a request to it fails; a request it refused as not the coordinator goes once more, to the new one', async () => {
  const c = fakeCluster();
  cacheCoordinators(c);
  const a = await c.findGroupCoordinator({ groupId: 'tx-1', coordinatorType: 1 });
  const b = await c.findGroupCoordinator({ groupId: 'tx-1', coordinatorType: 1 });
  assert.equal(c.lookups, 1);
  assert.equal(a.nodeId, 1);
  assert.equal(await b.endTxn(), 1);
  assert.equal(c.lookups, 1);
  // The coordinator moves: the refused request goes once more, to the coordinator looked up anew,
  // which the cache keeps from then on.
  c.node = 2;
  assert.equal(await b.endTxn(), 2);
  assert.equal(c.lookups, 2);
  const moved = await c.findGroupCoordinator({ groupId: 'tx-1', coordinatorType: 1 });
  assert.equal(c.lookups, 3);
  assert.equal(await moved.endTxn(), 2);
  await c.findGroupCoordinator({ groupId: 'tx-1', coordinatorType: 1 });
  assert.equal(c.lookups, 3);
  // Any other failure reaches the caller as it is (sent once), and the next lookup asks again.
  await assert.rejects(moved.txnOffsetCommit(), /timed out/);
  assert.equal(c.calls, 1);
  await c.findGroupCoordinator({ groupId: 'tx-1', coordinatorType: 1 });
  assert.equal(c.lookups, 4);
});

test('CONCURRENT_TRANSACTIONS is the coordinator answering: it reaches the caller, and the coordinator is kept', async () => {
  const c = fakeCluster();
  cacheCoordinators(c);
  const b = await c.findGroupCoordinator({ groupId: 'tx-1', coordinatorType: 1 });
  await assert.rejects(b.addPartitionsToTxn(), /concurrent/);
  assert.equal(c.calls, 1); // not sent again by the cache: its caller waits and tries again
  await c.findGroupCoordinator({ groupId: 'tx-1', coordinatorType: 1 });
  assert.equal(c.lookups, 1);
});

test('cached per coordinator type and key; concurrent lookups share one request', async () => {
  const c = fakeCluster();
  cacheCoordinators(c);
  cacheCoordinators(c); // installing twice does not wrap twice
  const [x, y] = await Promise.all([
    c.findGroupCoordinator({ groupId: 'g', coordinatorType: 0 }),
    c.findGroupCoordinator({ groupId: 'g', coordinatorType: 0 }),
  ]);
  assert.equal(c.lookups, 1);
  assert.equal(x.groupId, 'g');
  assert.equal(y.groupId, 'g');
  await c.findGroupCoordinator({ groupId: 'g' }); // type 0 is the default (a group)
  assert.equal(c.lookups, 1);
  await c.findGroupCoordinator({ groupId: 'g', coordinatorType: 1 });
  await c.findGroupCoordinator({ groupId: 'h', coordinatorType: 0 });
  assert.equal(c.lookups, 3);
});

test('a method that throws at once also drops the coordinator; a failed lookup is not kept', async () => {
  const c = fakeCluster();
  cacheCoordinators(c);
  const b = await c.findGroupCoordinator({ groupId: 'tx', coordinatorType: 1 });
  assert.throws(() => b.addOffsetsToTxn(), /thrown at once/);
  await c.findGroupCoordinator({ groupId: 'tx', coordinatorType: 1 });
  assert.equal(c.lookups, 2);

  const failing = {
    calls: 0,
    async findGroupCoordinator(_: { groupId: string }) {
      failing.calls++;
      if (failing.calls === 1) throw new Error('no coordinator yet');
      return { nodeId: 3 };
    },
  };
  cacheCoordinators(failing);
  await assert.rejects(failing.findGroupCoordinator({ groupId: 'x' }), /no coordinator yet/);
  assert.equal((await failing.findGroupCoordinator({ groupId: 'x' })).nodeId, 3);
  assert.equal(failing.calls, 2);
});

test('a cluster without coordinator lookups (a test double) is left as it is', () => {
  const c: Record<string, unknown> = { findBroker: () => undefined };
  cacheCoordinators(c);
  assert.equal(c.findGroupCoordinator, undefined);
});
