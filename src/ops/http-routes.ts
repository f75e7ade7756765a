import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Worker } from '../runtime/worker.js';
import type { Route } from './http-server.js';
import { locateKey, type QueryableStore, QueryError, queryableStores, readLocal } from './state-query.js';
import { topologyJson } from './status.js';
import { STATUS_PAGE_HTML } from './status-page.js';

/** Set on a request one worker forwards to another; a worker never forwards such a request again. */
export const FORWARDED_HEADER = 'x-sluice-forwarded-by';
/** Set on the answer to a forwarded request: the owner's address. */
export const FORWARDED_TO_HEADER = 'x-sluice-forwarded-to';
/** How long a forwarded query may take before the asking worker answers 504. */
const FORWARD_TIMEOUT_MS = 5000;

export function sendJson(
  res: ServerResponse,
  code: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(code, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  res.end(JSON.stringify(body));
}

/**
 * The worker's extra HTTP routes: the status page (`/`), the topology (`/topology`), the list of
 * queryable stores (`/state`) and state queries (`/state/<store>/<key>`), routed to the worker
 * that owns the key's partition.
 */
export function workerRoutes(worker: Worker): Route[] {
  const stores = queryableStores(worker.topology);
  const topology = JSON.stringify(topologyJson(worker.topology));
  return [
    (_req, res, url) => {
      if (url.pathname !== '/' && url.pathname !== '/index.html') return false;
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      res.end(STATUS_PAGE_HTML);
      return true;
    },
    (_req, res, url) => {
      if (url.pathname !== '/topology') return false;
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(topology);
      return true;
    },
    async (req, res, url) => {
      if (url.pathname !== '/state' && !url.pathname.startsWith('/state/')) return false;
      const parts = url.pathname.split('/').slice(2);
      if (parts.length === 0 || (parts.length === 1 && parts[0] === '')) {
        sendJson(res, 200, {
          stores: [...stores.values()].map((s) => ({
            name: s.name,
            kind: s.kind,
            operator: s.operator,
            subtopology: s.subtopology,
            keySerde: s.keySerde.name,
            partitions: worker.plan.get(s.subtopology) ?? null,
          })),
        });
        return true;
      }
      if (parts.length !== 2 || parts[1] === '') {
        sendJson(res, 400, { error: 'use /state/<store>/<url-encoded key>' });
        return true;
      }
      let storeName: string;
      let key: string;
      try {
        storeName = decodeURIComponent(parts[0]!);
        key = decodeURIComponent(parts[1]!);
      } catch {
        sendJson(res, 400, { error: 'bad URL encoding' });
        return true;
      }
      await queryState(worker, stores, storeName, key, req, res);
      return true;
    },
  ];
}

async function queryState(
  worker: Worker,
  stores: ReadonlyMap<string, QueryableStore>,
  storeName: string,
  key: string,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const self = { memberId: worker.memberId ?? null, http: worker.httpAddress ?? null };
  const base: Record<string, unknown> = { store: storeName, key };
  const store = stores.get(storeName);
  if (!store) {
    sendJson(res, 404, { ...base, error: 'unknown store', stores: [...stores.keys()], worker: self });
    return;
  }
  try {
    const { keyBytes, partition, task: taskId } = locateKey(store, key, (s) => worker.plan.get(s));
    base.partition = partition;
    base.task = taskId;
    const task = worker.tasks.get(taskId);
    if (task) {
      const value = readLocal(task, store, keyBytes);
      sendJson(res, 200, { ...base, value, worker: self });
      return;
    }
    if (req.headers[FORWARDED_HEADER]) {
      // The asking worker thought we own the key; we do not (any more): no second hop.
      throw new QueryError(503, `task ${taskId} is not owned by this worker (assignment changing)`, {
        reason: 'rebalancing',
      });
    }
    let group = await worker.group.get();
    let owner = group.members.find((m) => m.memberId === group.owners.get(taskId));
    if (!owner?.http) {
      worker.group.invalidate();
      group = await worker.group.get();
      owner = group.members.find((m) => m.memberId === group.owners.get(taskId));
    }
    if (!owner || owner.memberId === worker.memberId)
      throw new QueryError(503, `owner of task ${taskId} not known (rebalance in progress?)`, {
        reason: 'rebalancing',
        groupState: group.state,
      });
    if (!owner.http)
      throw new QueryError(503, `the owner of task ${taskId} advertises no HTTP address`, {
        owner: owner.memberId,
      });
    await forward(owner.http, storeName, key, worker, res, req.headers.authorization);
  } catch (e) {
    if (!(e instanceof QueryError)) throw e;
    sendJson(res, e.status, { ...base, ...e.extra, error: e.message, worker: self });
  }
}

async function forward(
  ownerUrl: string,
  store: string,
  key: string,
  worker: Worker,
  res: ServerResponse,
  /** The asker's Authorization header, passed on: the owner guards /state with the same token. */
  authorization: string | undefined,
) {
  const target = `${ownerUrl.replace(/\/+$/, '')}/state/${encodeURIComponent(store)}/${encodeURIComponent(key)}`;
  let r: Response;
  try {
    r = await fetch(target, {
      headers: {
        [FORWARDED_HEADER]: worker.memberId ?? worker.clientId,
        ...(authorization ? { authorization } : {}),
      },
      signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS),
    });
  } catch (e) {
    const timeout = (e as Error).name === 'TimeoutError';
    throw new QueryError(
      timeout ? 504 : 503,
      `owner at ${ownerUrl} did not answer: ${(e as Error).message}`,
      {
        reason: 'owner unreachable',
      },
    );
  }
  const text = await r.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = { error: text.trim() };
  }
  const via = { memberId: worker.memberId ?? null, http: worker.httpAddress ?? null };
  sendJson(
    res,
    r.status,
    body && typeof body === 'object' ? { ...(body as object), forwarded: { from: via, to: ownerUrl } } : body,
    { [FORWARDED_TO_HEADER]: ownerUrl },
  );
}
