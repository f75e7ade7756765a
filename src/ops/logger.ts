import { type Logger, pino } from 'pino';
import pretty from 'pino-pretty';
import { REDACT_PATHS, REDACTED, rememberSecrets, scrubber } from './redact.js';

export type { Logger } from 'pino';

/**
 * An error's message followed by those of its causes, each only when the text so far does not
 * hold it already: Sluice's errors repeat their cause's message (`invalid JSON: Unexpected token
 * …`), which pino's own serializer would then append a second time.
 */
export function messageWithNewCauses(err: unknown): string {
  let out = err instanceof Error ? err.message : String(err);
  const seen = new Set<unknown>([err]);
  for (let c = (err as { cause?: unknown })?.cause; c !== undefined && c !== null && !seen.has(c); ) {
    seen.add(c);
    const m = c instanceof Error ? c.message : typeof c === 'string' ? c : '';
    if (m !== '' && !out.includes(m)) out += `: ${m}`;
    c = (c as { cause?: unknown }).cause;
  }
  return out;
}

/** pino's error serializer, with each cause's message at most once in `message`. */
export function serializeError(err: unknown): unknown {
  const out = pino.stdSerializers.err(err as Error) as unknown;
  if (out && typeof out === 'object' && err instanceof Error)
    (out as { message: string }).message = messageWithNewCauses(err);
  return out;
}

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
    serializers: { err: serializeError },
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
