/**
 * kafkajs 2.2.4's request queue (one per broker connection) polls itself every millisecond for as
 * long as the connection lives: every answered request ends in `scheduleCheckPendingRequests`,
 * which sets a timer for `throttledUntil − Date.now()` (−1 − now, about −1.8e12, when the broker
 * never throttled), and that timer's check schedules the next one. Node clamps the delay to 1 ms,
 * and Node 24 also prints a TimeoutNegativeWarning for it (kafkajs issues #1704 and #1751). An
 * idle kafkajs consumer ran ~1,800 such checks a second, for nothing: there was no pending
 * request to send.
 *
 * This replaces `scheduleCheckPendingRequests` with one that sets a timer only when a request is
 * waiting in the queue: until the broker's throttle ends when it is throttled, else after
 * kafkajs's own 10 ms (a request held back by the in-flight limit is also sent as soon as an
 * answer frees a slot, `fulfillRequest`). Nothing else of the queue changes: a request enters the
 * pending list only through `push`, which calls this, and the check after an answer still runs.
 */
import { replaceMethod } from './kafkajs-prototype.js';

/** kafkajs's CHECK_PENDING_REQUESTS_INTERVAL (not exported). */
export const CHECK_PENDING_INTERVAL_MS = 10;

interface RequestQueueLike {
  pending: unknown[];
  throttledUntil: number;
  throttleCheckTimeoutId: ReturnType<typeof setTimeout> | null;
  checkPendingRequests(): void;
}

/** Sets one timer to send the pending requests, when there are any and none is set. */
export function schedulePendingCheck(this: RequestQueueLike): void {
  if (this.throttleCheckTimeoutId || this.pending.length === 0) return;
  const throttled = this.throttledUntil - Date.now();
  this.throttleCheckTimeoutId = setTimeout(
    () => {
      this.throttleCheckTimeoutId = null;
      this.checkPendingRequests();
    },
    throttled > 0 ? throttled : CHECK_PENDING_INTERVAL_MS,
  );
}

/** Whether kafkajs's request queues poll only while a request waits. */
export const requestQueuePatched = replaceMethod(
  'kafkajs/src/network/requestQueue/index.js',
  'scheduleCheckPendingRequests',
  schedulePendingCheck,
  ['checkPendingRequests'],
);
