import './kafkajs-preload.js';
import { logLevel as kafkaLogLevel, type logCreator } from 'kafkajs';
import type { Logger } from '../ops/logger.js';

/**
 * kafkajs logs through pino. kafkajs reports every retriable broker answer (a coordinator that is
 * still loading, a rebalance in progress) at ERROR although it retries them itself; Sluice handles
 * the failures that matter and logs those itself, so kafkajs's ERROR becomes pino's warn.
 */
/**
 * Broker answers that are retried as a matter of course, which kafkajs logs once per request:
 * - leadership moving (`NOT_LEADER_FOR_PARTITION`, `LEADER_NOT_AVAILABLE`): right after topics
 *   are created, or a broker restarts (43 on a first start), retried with fresh metadata;
 * - `CONCURRENT_TRANSACTIONS`: the coordinator still completing the previous transaction, its
 *   request sent again a few ms later (send-messages.ts, producer.ts).
 * They go to debug; one that never settles ends in an error Sluice reports itself.
 */
const RETRIED_ANSWERS = [
  'This server is not the leader for that topic-partition',
  'There is no leader for this topic-partition as we are in the middle of a leadership election',
  'The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing',
];

/** True for a kafkajs log line that only reports a broker answer retried as a matter of course. */
export function isRetriedAnswer(message: unknown, extra: Record<string, unknown>): boolean {
  const text = typeof extra.error === 'string' ? extra.error : typeof message === 'string' ? message : '';
  return RETRIED_ANSWERS.some((m) => text.includes(m));
}

export function kafkaLogCreator(logger: Logger): logCreator {
  const child = logger.child({ component: 'kafkajs' });
  return () =>
    ({ level, log }) => {
      const { message, timestamp: _t, logger: _l, ...extra } = log as Record<string, any>;
      // Our idempotent producers retry a bounded number of times on purpose: a task whose send
      // fails is rebuilt from its last checkpoint, which keeps exactly-once without endless retry.
      if (typeof message === 'string' && message.startsWith('Limiting retries for the idempotent producer'))
        return;
      if (isRetriedAnswer(message, extra)) {
        child.debug(extra, message);
        return;
      }
      switch (level) {
        case kafkaLogLevel.ERROR:
        case kafkaLogLevel.WARN:
          child.warn(extra, message);
          break;
        case kafkaLogLevel.INFO:
          child.debug(extra, message);
          break;
        default:
          child.trace(extra, message);
      }
    };
}

export function kafkaLogLevelFor(level: string): kafkaLogLevel {
  switch (level) {
    case 'silent':
    case 'fatal':
      return kafkaLogLevel.NOTHING;
    case 'error':
    case 'warn':
    case 'info':
      return kafkaLogLevel.WARN;
    case 'trace':
      // Everything, down to kafkajs's per-request lines (a secret-leak test runs at this level).
      return kafkaLogLevel.DEBUG;
    default:
      return kafkaLogLevel.INFO;
  }
}
