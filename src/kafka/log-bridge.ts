import './kafkajs-preload.js';
import { logLevel as kafkaLogLevel, type logCreator } from 'kafkajs';
import type { Logger } from '../ops/logger.js';

/**
 * kafkajs logs through pino. kafkajs reports every retriable broker answer (a coordinator that is
 * still loading, a rebalance in progress) at ERROR although it retries them itself; Sluice handles
 * the failures that matter and logs those itself, so kafkajs's ERROR becomes pino's warn.
 */
export function kafkaLogCreator(logger: Logger): logCreator {
  const child = logger.child({ component: 'kafkajs' });
  return () =>
    ({ level, log }) => {
      const { message, timestamp: _t, logger: _l, ...extra } = log as Record<string, any>;
      // Our idempotent producers retry a bounded number of times on purpose: a task whose send
      // fails is rebuilt from its last checkpoint, which keeps exactly-once without endless retry.
      if (typeof message === 'string' && message.startsWith('Limiting retries for the idempotent producer'))
        return;
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
