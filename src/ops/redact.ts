/**
 * Keeping secrets out of logs, twice over:
 *
 * 1. By path (`REDACT_PATHS`, pino's `redact`): a config object, kafkajs options or an HTTP request
 *    that ends up in a log call has its password, key and token fields replaced.
 * 2. By value (`scrubber`, pino's `streamWrite` hook): every finished log line is searched for the
 *    secret strings themselves, so a secret that slipped into a message, an error text or a stack
 *    trace (say, a broker that echoes a JAAS config) is still replaced. One `indexOf` per secret per
 *    line: nothing on the record path logs, so this costs nothing measurable.
 */
export const REDACTED = '[REDACTED]';

const SECRET_FIELDS = ['password', 'authToken', 'authorization', 'key', 'passphrase'];

/** Field paths pino blanks out: the secret fields of the config and of kafkajs's `sasl`/`ssl` options, up to three levels deep. */
export const REDACT_PATHS: readonly string[] = [
  ...['sasl', 'ssl', 'http', 'headers'].flatMap((parent) =>
    SECRET_FIELDS.filter((f) => !(f === 'key' && parent !== 'ssl')).flatMap((f) => [
      `${parent}.${f}`,
      `*.${parent}.${f}`,
      `*.*.${parent}.${f}`,
    ]),
  ),
  'password',
  '*.password',
  'authToken',
  '*.authToken',
  // schemaRegistry.auth.{password,bearerToken}. Not deeper (`*.*.*.…`): pino's wildcard redaction
  // three levels down also walked kafkajs's trace-level request objects and broke its SCRAM
  // exchange (a TypedArray getter on a copied object); a config logged inside another object is
  // covered by the by-value scrubber.
  '*.*.password',
  'bearerToken',
  '*.bearerToken',
  '*.*.bearerToken',
];

/** The secret strings of a configuration: SASL password, HTTP token, registry password and token (the TLS key stays in its file). */
export function secretsOf(config: {
  kafka?: { sasl?: { password?: string | undefined } };
  http?: { authToken?: string | undefined };
  schemaRegistry?: {
    url?: string | undefined;
    auth?: { password?: string | undefined; bearerToken?: string | undefined };
  };
}): string[] {
  return [
    config.kafka?.sasl?.password,
    config.http?.authToken,
    config.schemaRegistry?.auth?.password,
    config.schemaRegistry?.auth?.bearerToken,
    urlPassword(config.schemaRegistry?.url),
  ].filter((s): s is string => typeof s === 'string' && s.length > 0);
}

/** The password of a URL with credentials in it (`https://key:secret@host`), as written. */
function urlPassword(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  try {
    const p = new URL(url).password;
    return p === '' ? undefined : p;
  } catch {
    return undefined;
  }
}

const known = new Set<string>();

/** Adds secrets to the process-wide list that {@link scrubSecrets} removes (the CLI's last-words path). */
export function rememberSecrets(secrets: readonly string[]): void {
  for (const s of secrets) if (s.length > 0) known.add(s);
}

/** Replaces every secret in `s`, as written and as escaped inside a JSON string. */
export function scrubber(secrets: readonly string[]): (s: string) => string {
  const needles = [...new Set(secrets.flatMap((x) => [x, JSON.stringify(x).slice(1, -1)]))]
    .filter((x) => x.length > 0)
    // Longest first, so a secret that contains another is replaced whole.
    .sort((a, b) => b.length - a.length);
  if (needles.length === 0) return (s) => s;
  return (s) => {
    for (const n of needles) if (s.includes(n)) s = s.split(n).join(REDACTED);
    return s;
  };
}

/** Scrubs the secrets remembered so far (for text written outside the logger). */
export function scrubSecrets(s: string): string {
  return known.size === 0 ? s : scrubber([...known])(s);
}
