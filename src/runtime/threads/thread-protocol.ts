/**
 * What the main thread of a `sluice run` process and its stream threads say to each other over a
 * worker_thread's message port (threaded.ts ⇄ thread-main.ts). Requests carry an id, answered
 * once; a thread also sends `started` and `fatal` on its own.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ERROR_CODES, type ErrorCode, SluiceError } from '../../errors.js';
import type { Route } from '../../ops/http-server.js';

export type ThreadRequest = { id: number } & (
  | { op: 'metrics' | 'live' | 'ready' | 'status' }
  | { op: 'http'; path: string; headers: Record<string, string> }
  | { op: 'stop'; leaveGroup?: boolean | undefined }
);

export interface WireError {
  message: string;
  name?: string | undefined;
  code?: string | undefined;
  stack?: string | undefined;
}

export type ThreadReply =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: WireError };
export type ThreadEvent = { event: 'started' } | { event: 'fatal'; error: WireError };

export function toWireError(e: unknown): WireError {
  if (!(e instanceof Error)) return { message: String(e) };
  const code = (e as { code?: unknown }).code;
  return {
    message: e.message,
    name: e.name,
    stack: e.stack,
    code: typeof code === 'string' ? code : undefined,
  };
}

/** The thread's error on this side: a SluiceError again when it was one (its code kept). */
export function fromWireError(w: WireError, prefix = ''): Error {
  const e = ERROR_CODES.includes(w.code as ErrorCode)
    ? new SluiceError(w.code as ErrorCode, `${prefix}${w.message}`)
    : new Error(`${prefix}${w.message}`);
  if (w.stack) e.stack = w.stack;
  return e;
}

/** A route's answer, taken down to be sent by another thread. */
export interface CapturedResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Runs a GET of `path` through `routes` (they write with `writeHead` and `end` only) and returns
 * what they wrote; 404 when none takes it.
 */
export async function captureRoute(
  routes: readonly Route[],
  path: string,
  headers: Record<string, string>,
): Promise<CapturedResponse> {
  const out: CapturedResponse = { status: 404, headers: {}, body: 'not found\n' };
  let sent = false;
  const res = {
    get headersSent() {
      return sent;
    },
    writeHead(status: number, h: Record<string, string> = {}) {
      out.status = status;
      out.headers = { ...h };
      sent = true;
      return res;
    },
    end(body?: string | Buffer) {
      out.body = body === undefined ? '' : String(body);
      sent = true;
    },
  };
  const req = { method: 'GET', url: path, headers };
  // Set, not resolved against a base: `//host/state/...` must stay a path (which no route takes),
  // not become host `host` and path `/state/...`, past the main thread's token check.
  const url = new URL('http://localhost');
  const q = path.indexOf('?');
  url.pathname = q < 0 ? path : path.slice(0, q);
  if (q >= 0) url.search = path.slice(q);
  for (const route of routes)
    if (await route(req as unknown as IncomingMessage, res as unknown as ServerResponse, url)) return out;
  return out;
}
