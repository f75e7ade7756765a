import { type Logger, pino } from 'pino';
import pretty from 'pino-pretty';
import { REDACT_PATHS, REDACTED, rememberSecrets, scrubber } from './redact.js';

export type { Logger } from 'pino';

/**
 * JSON logs by default (one object a line, for collectors); pretty, coloured lines when the
 * format is `pretty`, or `auto` and stdout is a terminal.
 */
export function createLogger(opts: {
  level: string;
  format: 'auto' | 'json' | 'pretty';
  name?: string;
  /** Strings that must never appear in a log line (see redact.ts); `secretsOf(config)`. */
  secrets?: readonly string[];
}): Logger {
  const usePretty = opts.format === 'pretty' || (opts.format === 'auto' && process.stdout.isTTY === true);
  rememberSecrets(opts.secrets ?? []);
  const base = {
    level: opts.level,
    name: opts.name ?? 'sluice',
    redact: { paths: [...REDACT_PATHS], censor: REDACTED },
    hooks: { streamWrite: scrubber(opts.secrets ?? []) },
  };
  if (usePretty) {
    return pino(
      base,
      pretty({ colorize: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname', sync: true }),
    );
  }
  return pino(base);
}
