import './kafkajs-preload.js';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { connect } from 'node:tls';
import type { KafkaConfig, SASLOptions } from 'kafkajs';
import { SluiceError } from '../errors.js';
import type { KafkaSettings } from './types.js';

/**
 * The kafkajs `ssl` and `sasl` options from Sluice's settings. PEM files are read here, once;
 * the result holds the secrets (key, password) and must never be logged.
 */
export function securityOptions(settings: KafkaSettings): Pick<KafkaConfig, 'ssl' | 'sasl'> {
  const out: Pick<KafkaConfig, 'ssl' | 'sasl'> = {};
  const ssl = settings.ssl;
  if (ssl?.enabled) {
    const read = (what: string, path: string | undefined) => {
      if (path === undefined) return undefined;
      try {
        return readFileSync(path);
      } catch (e) {
        throw new SluiceError('SLUICE_CONFIG_INVALID', `kafka.ssl.${what}: cannot read ${path}`, {
          cause: e,
        });
      }
    };
    const ca = read('ca', ssl.ca);
    const cert = read('cert', ssl.cert);
    const key = read('key', ssl.key);
    out.ssl = {
      rejectUnauthorized: ssl.rejectUnauthorized,
      ...(ca ? { ca: [ca] } : {}),
      ...(cert ? { cert } : {}),
      ...(key ? { key } : {}),
    };
  }
  const sasl = settings.sasl;
  if (sasl?.mechanism) {
    out.sasl = {
      mechanism: sasl.mechanism,
      username: sasl.username ?? '',
      password: sasl.password ?? '',
    } as SASLOptions;
  }
  return out;
}

/**
 * Node's TLS verification failures (`err.code`): retrying cannot help, the configuration is wrong.
 * kafkajs wraps them in a retriable KafkaJSConnectionError and keeps the code.
 */
const TLS_VERIFY_CODES = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'ERR_SSL_WRONG_VERSION_NUMBER',
  'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA',
  'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE',
  'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
]);

function chain(e: unknown): unknown[] {
  const out: unknown[] = [];
  for (let cur = e, i = 0; cur && i < 8; i++) {
    out.push(cur);
    cur = (cur as { cause?: unknown; originalError?: unknown }).cause ?? (cur as any).originalError;
  }
  return out;
}

/**
 * Turns a refused login or a failed TLS verification into `SLUICE_KAFKA_AUTH`, which is not
 * retried: a wrong password or CA must stop the worker at start with one clear sentence, not
 * spin in reconnects. Anything else is returned unchanged.
 */
export function asAuthError(e: unknown, settings: KafkaSettings): unknown {
  for (const c of chain(e)) {
    const name = (c as Error)?.name;
    const code = (c as { code?: unknown })?.code;
    if (name === 'KafkaJSSASLAuthenticationError') {
      const who = settings.sasl?.username ? ` as user ${JSON.stringify(settings.sasl.username)}` : '';
      return new SluiceError(
        'SLUICE_KAFKA_AUTH',
        `Kafka refused the SASL ${settings.sasl?.mechanism?.toUpperCase() ?? ''} login${who} ` +
          `(${(c as Error).message}); check kafka.sasl.mechanism, kafka.sasl.username and kafka.sasl.password`,
        { cause: e },
      );
    }
    if (typeof code === 'string' && TLS_VERIFY_CODES.has(code)) {
      return new SluiceError(
        'SLUICE_KAFKA_AUTH',
        `TLS to Kafka failed (${code}: ${(c as Error).message}); check kafka.ssl.ca, kafka.ssl.cert, ` +
          'kafka.ssl.key and that the broker listener speaks TLS',
        { cause: e },
      );
    }
  }
  return e;
}

/** True for the errors {@link asAuthError} makes. */
export function isAuthError(e: unknown): boolean {
  return e instanceof SluiceError && e.code === 'SLUICE_KAFKA_AUTH';
}

/**
 * One TLS handshake with the first broker that answers, before kafkajs connects: kafkajs treats a
 * failed certificate check as a retriable connection error and retries it for a minute, so a wrong
 * CA would look like a broker outage. A refused or silent broker is left to the normal retries.
 */
export async function tlsPreflight(
  settings: KafkaSettings,
  ssl: Pick<KafkaConfig, 'ssl'>['ssl'],
): Promise<void> {
  if (!ssl) return;
  const opts = typeof ssl === 'object' ? ssl : {};
  for (const b of settings.brokers) {
    const i = b.lastIndexOf(':');
    const host = b.slice(0, i);
    const port = Number(b.slice(i + 1));
    const err = await new Promise<Error | undefined>((resolve) => {
      const socket = connect({ ...opts, host, port, ...(isIP(host) ? {} : { servername: host }) }, () => {
        socket.end();
        resolve(undefined);
      });
      socket.setTimeout(5000, () => {
        socket.destroy();
        resolve(undefined);
      });
      socket.once('error', (e) => {
        socket.destroy();
        resolve(e);
      });
    });
    if (err === undefined) return;
    const auth = asAuthError(err, settings);
    if (auth !== err) throw auth;
  }
}
