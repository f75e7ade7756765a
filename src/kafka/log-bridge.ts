import './kafkajs-preload.js';
import { logLevel as kafkaLogLevel, type logCreator } from 'kafkajs';
import type { Logger } from '../ops/logger.js';

/**
 * kafkajs logs through pino. kafkajs reports every retriable broker answer (a coordinator that is
 * still loading, a rebalance in progress) at ERROR although it retries them itself; Sluice handles
 * the failures that matter and logs those itself, so kafkajs's ERROR becomes pino's warn.
 */
/**
 * Broker answers that only say leadership is moving (`NOT_LEADER_FOR_PARTITION`,
 * `LEADER_NOT_AVAILABLE`): right after topics are created, or a broker restarts, kafkajs logs one
 * per request (43 on a first start) and retries with fresh metadata. They go to debug; a
 * leadership that never settles ends in an error Sluice reports itself.
 */
const LEADERSHIP_NOISE = [
  'This server is not the leader for that topic-partition',
  'There is no leader for this topic-partition as we are in the middle of a leadership election',
];

/** True for a kafkajs log line that only reports a retriable leadership change. */
export function isLeadershipNoise(message: unknown, extra: Record<string, unknown>): boolean {
  const text = typeof extra.error === 'string' ? extra.error : typeof message === 'string' ? message : '';
  return LEADERSHIP_NOISE.some((m) => text.includes(m));
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
      if (isLeadershipNoise(message, extra)) {
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
