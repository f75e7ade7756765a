import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { exposureWarning, isProtectedPath } from '../../../src/ops/auth.js';
import { startOpsServer } from '../../../src/ops/http-server.js';

const TOKEN = 'a-token-of-32-characters-0123456';

async function server(t: import('node:test').TestContext, metrics = false) {
  const s = await startOpsServer({
    host: '127.0.0.1',
    port: 0,
    registry: new Registry(),
    logger: pino({ level: 'silent' }),
    health: { live: () => true, ready: () => ({ ready: true }), status: () => ({ state: 'running' }) },
    routes: [
      (_req, res, url) => {
        if (!url.pathname.startsWith('/state/')) return false;
        res.end('value');
        return true;
      },
    ],
    auth: { token: TOKEN, metrics },
  });
  t.after(() => s.close());
  return s;
}

const get = (url: string, token?: string) =>
  fetch(url, token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } });

test('http auth should guard /status, /state/* and / with the bearer token, with 401 and WWW-Authenticate', async (t) => {
  const s = await server(t);
  for (const path of ['/status', '/state/counts/k1', '/']) {
    const none = await get(`${s.url}${path}`);
    assert.equal(none.status, 401, path);
    assert.equal(none.headers.get('www-authenticate'), 'Bearer realm="sluice"');
    const wrong = await get(`${s.url}${path}`, `${TOKEN}x`);
    assert.equal(wrong.status, 401, path);
    assert.match(wrong.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
    assert.equal((await get(`${s.url}${path}`, TOKEN.slice(0, 10))).status, 401, 'a prefix is not the token');
  }
  const ok = await get(`${s.url}/status`, TOKEN);
  assert.equal(ok.status, 200);
  assert.deepEqual(await ok.json(), { state: 'running' });
  assert.equal(await (await get(`${s.url}/state/counts/k1`, TOKEN)).text(), 'value');
  const lower = await fetch(`${s.url}/status`, { headers: { authorization: `bearer   ${TOKEN}` } });
  assert.equal(lower.status, 200, 'the scheme is case-insensitive');
  // Dot segments are resolved before the check, as before routing.
  assert.equal((await get(`${s.url}/x/../status`)).status, 401);
});

test('http auth should leave /metrics, /healthz and /readyz open unless authMetrics', async (t) => {
  const open = await server(t);
  for (const path of ['/metrics', '/healthz', '/readyz'])
    assert.equal((await get(`${open.url}${path}`)).status, 200, path);
  const guarded = await server(t, true);
  assert.equal((await get(`${guarded.url}/metrics`)).status, 401);
  assert.equal((await get(`${guarded.url}/metrics`, TOKEN)).status, 200);
  assert.equal((await get(`${guarded.url}/healthz`)).status, 200, 'probes stay open');
  assert.equal((await get(`${guarded.url}/readyz`)).status, 200, 'probes stay open');
});

test('http auth should match prefixes by path segment only', () => {
  const auth = { token: TOKEN };
  assert.equal(isProtectedPath('/state', auth), true);
  assert.equal(isProtectedPath('/state/s/k', auth), true);
  assert.equal(isProtectedPath('/stateful', auth), false);
  assert.equal(isProtectedPath('/status/', auth), true);
  assert.equal(isProtectedPath('/metrics', auth), false);
  assert.equal(isProtectedPath('/metrics', { ...auth, metrics: true }), true);
  // A stream thread's own surface (`/t/<i>/...`) is guarded as the same path without the prefix.
  assert.equal(isProtectedPath('/t/1/state/s/k', auth), true);
  assert.equal(isProtectedPath('/t/0/status', auth), true);
  assert.equal(isProtectedPath('/t/0', auth), true);
  assert.equal(isProtectedPath('/t/1/metrics', auth), false);
  assert.equal(isProtectedPath('/t/1/metrics', { ...auth, metrics: true }), true);
  assert.equal(isProtectedPath('/t/1/healthz', auth), false);
  assert.equal(isProtectedPath('//state/s/k', auth), true);
  assert.equal(isProtectedPath('/t/0//status', auth), true);
});

test('http auth should warn when a non-loopback address has no token', () => {
  assert.match(exposureWarning('0.0.0.0', {}) ?? '', /without http.authToken/);
  assert.equal(exposureWarning('0.0.0.0', { token: TOKEN }), undefined);
  assert.equal(exposureWarning('127.0.0.1', {}), undefined);
});
