import { type Logger, pino } from 'pino';
import pretty from 'pino-pretty';

export type { Logger } from 'pino';

/**
 * JSON logs by default (one object a line, for collectors); pretty, coloured lines when the
 * format is `pretty`, or `auto` and stdout is a terminal.
 */
export function createLogger(opts: {
  level: string;
  format: 'auto' | 'json' | 'pretty';
  name?: string;
}): Logger {
  const usePretty = opts.format === 'pretty' || (opts.format === 'auto' && process.stdout.isTTY === true);
  const base = { level: opts.level, name: opts.name ?? 'sluice' };
  if (usePretty) {
    return pino(
      base,
      pretty({ colorize: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname', sync: true }),
    );
  }
  return pino(base);
}
