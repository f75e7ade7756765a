import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { kafkajsPatchStatus } from '../../../src/kafka/kafkajs-preload.js';
import { CHECK_PENDING_INTERVAL_MS, requestQueuePatched } from '../../../src/kafka/kafkajs-request-queue.js';

const require = createRequire(import.meta.url);
const RequestQueue = require('kafkajs/src/network/requestQueue/index.js');

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function queue(maxInFlightRequests?: number): any {
  return new RequestQueue({
    maxInFlightRequests,
    requestTimeout: 30_000,
    enforceRequestTimeout: false,
    clientId: 'test',
    broker: 'b:9092',
    logger: quiet,
  });
}

/** A request that records when it went out; answered by `q.fulfillRequest`. */
function request(correlationId: number, sent: number[]) {
  return {
    entry: { correlationId, apiKey: 0, apiName: 'Produce', apiVersion: 7, resolve() {}, reject() {} },
    expectResponse: true,
    sendRequest: () => sent.push(correlationId),
  };
}

test('kafkajs request queues should be patched, and say so in the patch status', () => {
  assert.equal(requestQueuePatched, true);
  assert.equal(
    kafkajsPatchStatus().patches[
      'request queues that poll only while a request waits (kafkajs-request-queue.ts)'
    ],
    true,
  );
});

test('an answered request with nothing pending should leave no timer (kafkajs polled every 1 ms)', () => {
  const q = queue();
  const sent: number[] = [];
  q.push(request(1, sent));
  assert.deepEqual(sent, [1]);
  q.fulfillRequest({ correlationId: 1, payload: Buffer.alloc(0), size: 0 });
  assert.equal(q.throttleCheckTimeoutId, null);
  q.scheduleCheckPendingRequests();
  assert.equal(q.throttleCheckTimeoutId, null);
});

test('a request held back by a throttle should go when the throttle ends', async () => {
  const q = queue();
  const sent: number[] = [];
  q.maybeThrottle(60);
  q.push(request(1, sent));
  assert.deepEqual(sent, [], 'throttled: pending');
  assert.notEqual(q.throttleCheckTimeoutId, null);
  await sleep(20);
  assert.deepEqual(sent, []);
  await sleep(80);
  assert.deepEqual(sent, [1]);
  assert.equal(q.throttleCheckTimeoutId, null, 'nothing pending any more: no timer');
  q.destroy();
});

test('a request held back by the in-flight limit should go when an answer frees a slot, or on the timer', async () => {
  const q = queue(1);
  const sent: number[] = [];
  q.push(request(1, sent));
  q.push(request(2, sent));
  assert.deepEqual(sent, [1]);
  assert.notEqual(q.throttleCheckTimeoutId, null, 'a check is scheduled while one waits');
  q.fulfillRequest({ correlationId: 1, payload: Buffer.alloc(0), size: 0 });
  assert.deepEqual(sent, [1, 2], 'sent on the answer, not after the timer');
  await sleep(CHECK_PENDING_INTERVAL_MS * 3);
  assert.equal(q.throttleCheckTimeoutId, null);
  // The in-flight limit lifted some other way (kafkajs checks on its timer too).
  q.push(request(3, sent));
  assert.deepEqual(sent, [1, 2]);
  q.inflight.clear();
  await sleep(CHECK_PENDING_INTERVAL_MS * 3);
  assert.deepEqual(sent, [1, 2, 3]);
  q.destroy();
});

test('waitForPendingRequests should still resolve on the last answer', async () => {
  const q = queue();
  const sent: number[] = [];
  q.push(request(1, sent));
  let done = false;
  const waiting = q.waitForPendingRequests().then(() => {
    done = true;
  });
  await sleep(5);
  assert.equal(done, false);
  q.fulfillRequest({ correlationId: 1, payload: Buffer.alloc(0), size: 0 });
  await waiting;
  assert.equal(done, true);
});
