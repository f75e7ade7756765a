import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** What the HTTP server guards with `http.authToken`. */
export interface HttpAuth {
  /** The bearer token; when absent every path is open. */
  token?: string | undefined;
  /** Guard /metrics too. /healthz and /readyz stay open for probes either way. */
  metrics?: boolean | undefined;
}

/**
 * Paths that expose the app's data or inner workings: /status, /state/* (queryable state) and the
 * status page at `/`. A prefix matches itself and what lies below it (`/state/s/k`), not `/stateful`.
 */
export const PROTECTED_PREFIXES = ['/status', '/state'] as const;

export function isProtectedPath(path: string, auth: HttpAuth): boolean {
  // `//state/x` and `/.//state` name the same route for some parsers: guard what they could reach.
  const pathname = path.replace(/\/{2,}/g, '/');
  // `/t/<i>/...`: one stream thread's routes (processing.threads), guarded as the same path.
  const thread = /^\/t\/\d+(\/.*)?$/.exec(pathname);
  if (thread) return isProtectedPath(thread[1] ?? '/', auth);
  if (pathname === '/') return true;
  if (auth.metrics && pathname === '/metrics') return true;
  for (const p of PROTECTED_PREFIXES) {
    if (pathname === p || pathname.startsWith(`${p}/`)) return true;
  }
  return false;
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/**
 * True when the request carries `Authorization: Bearer <token>`. Compared in constant time on
 * SHA-256 digests, so neither the content nor the length of the token leaks through timing.
 */
export function hasBearer(req: IncomingMessage, token: string): boolean {
  const h = req.headers.authorization;
  if (typeof h !== 'string') return false;
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(h);
  if (!m) return false;
  return timingSafeEqual(digest(m[1]!), digest(token));
}

/**
 * Answers 401 (with `WWW-Authenticate: Bearer`) and returns false when `pathname` is guarded and
 * the request lacks the token; returns true when the request may go on.
 */
export function authorize(
  req: IncomingMessage,
  res: ServerResponse,
  pathname: string,
  auth: HttpAuth,
): boolean {
  if (!auth.token || !isProtectedPath(pathname, auth)) return true;
  if (hasBearer(req, auth.token)) return true;
  const presented = typeof req.headers.authorization === 'string';
  res.writeHead(401, {
    'content-type': 'text/plain; charset=utf-8',
    'cache-control': 'no-store',
    'www-authenticate': presented ? 'Bearer realm="sluice", error="invalid_token"' : 'Bearer realm="sluice"',
  });
  res.end('unauthorized: send Authorization: Bearer <http.authToken>\n');
  return false;
}

/** A warning to log when the guarded paths are reachable from other machines without a token. */
export function exposureWarning(host: string, auth: HttpAuth): string | undefined {
  if (auth.token) return undefined;
  if (host === 'localhost' || host === '::1' || host.startsWith('127.')) return undefined;
  return `HTTP listens on ${host} without http.authToken: /status and /state are open to anyone who can reach it`;
}
