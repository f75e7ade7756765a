import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import { BackgroundHeartbeat } from '../../../src/kafka/background-heartbeat.js';

function fakeGroup() {
  const g = {
    memberId: null as string | null,
    joining: false,
    closed: false,
    beats: [] as number[],
    fail: undefined as Error | undefined,
    async heartbeat({ interval }: { interval: number }) {
      g.beats.push(interval);
      if (g.fail) throw g.fail;
    },
  };
  return g;
}

test('the background heartbeat should beat for a member in a group, and not before it joined', async () => {
  const g = fakeGroup();
  const now = 0;
  const b = new BackgroundHeartbeat({
    intervalMs: 1000,
    maxHandlerMs: 60_000,
    group: () => g,
    now: () => now,
  });
  assert.equal(b.tick(), false, 'no member id yet: no heartbeat');
  assert.deepEqual(g.beats, []);
  g.memberId = 'm-1';
  assert.equal(b.tick(), true);
  assert.deepEqual(g.beats, [1000], "kafkajs's gate gets the interval: no extra beat while the runner beats");
  // Its errors are the runner's: swallowed here (no unhandled rejection); after one that only a
  // rejoin cures, it waits for the member to join again.
  g.fail = Object.assign(new Error('Connection error'), { name: 'KafkaJSConnectionError' });
  assert.equal(b.tick(), true);
  await new Promise((r) => setImmediate(r));
  assert.equal(b.tick(), true, 'a connection error: beating on');
  g.fail = Object.assign(new Error('The group is rebalancing, so a rejoin is needed'), {
    type: 'REBALANCE_IN_PROGRESS',
  });
  assert.equal(b.tick(), true);
  await new Promise((r) => setImmediate(r));
  assert.equal(b.tick(), false, 'a rebalance: the runner must rejoin; no beat holds the rebalance up');
  b.joined();
  g.fail = undefined;
  assert.equal(b.tick(), true, 'joined again: beating');
  // Never during a join, for a group kafkajs left, or after a crash until the next join.
  g.joining = true;
  assert.equal(b.tick(), false);
  g.joining = false;
  g.closed = true;
  assert.equal(b.tick(), false);
  g.closed = false;
  b.pause();
  assert.equal(b.tick(), false);
  b.joined();
  assert.equal(b.tick(), true);
  assert.equal(g.beats.length, 6);
  const none = new BackgroundHeartbeat({ intervalMs: 1000, maxHandlerMs: 1, group: () => undefined });
  assert.equal(none.tick(), false, 'no group: nothing');
});

test('a batch handler stuck past maxHandlerMs should stop the background heartbeat until it ends', async () => {
  const g = fakeGroup();
  g.memberId = 'm-1';
  let now = 0;
  const b = new BackgroundHeartbeat({
    intervalMs: 1000,
    maxHandlerMs: 60_000,
    group: () => g,
    now: () => now,
  });
  let finish!: () => void;
  const handler = b.handling(
    () =>
      new Promise<string>((r) => {
        finish = () => r('done');
      }),
  );
  now = 30_000;
  assert.equal(b.tick(), true, 'a handler within the bound: the member is helped');
  now = 60_001;
  assert.equal(
    b.tick(),
    false,
    'a handler past the bound: the member must drop out, as with max.poll.interval.ms',
  );
  finish();
  assert.equal(await handler, 'done', "the handler's result passes through");
  assert.equal(b.tick(), true, 'the handler ended: beating again');
  // A handler that throws ends too.
  await assert.rejects(
    b.handling(async () => {
      throw new Error('boom');
    }),
    /boom/,
  );
  now = 1e9;
  assert.equal(b.tick(), true);
});

test('start should beat twice per interval on one timer, and stop should end it for good', () => {
  mock.timers.enable({ apis: ['setInterval'] });
  try {
    const g = fakeGroup();
    g.memberId = 'm-1';
    const b = new BackgroundHeartbeat({ intervalMs: 20, maxHandlerMs: 60_000, group: () => g });
    b.start();
    b.start(); // one timer, not two
    mock.timers.tick(100);
    assert.equal(g.beats.length, 10, 'every 10 ms (half the interval; kafkajs gates the sends)');
    b.stop();
    mock.timers.tick(100);
    assert.equal(g.beats.length, 10, 'no beat after stop');
    b.start();
    mock.timers.tick(100);
    assert.equal(
      g.beats.length,
      10,
      'a start after stop (the consumer stopped during its first join) does nothing',
    );
  } finally {
    mock.timers.reset();
  }
});
