import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { loadConfig } from '../../../src/config/load.js';
import { ConfigError, SchemaRegistryError } from '../../../src/errors.js';
import { App } from '../../../src/index.js';
import type { InRecord } from '../../../src/kafka/types.js';
import {
  notTheRecords,
  RegistryClient,
  registryUnavailable,
  retryAfterMs,
} from '../../../src/registry/client.js';
import { prepareSchemas } from '../../../src/registry/prepare.js';
import { avro } from '../../../src/registry/serdes.js';

/** A local HTTP server that records requests and answers with `reply` (not a registry: for headers and errors). */
async function server(reply: (req: IncomingMessage, body: string) => [number, unknown]) {
  const seen: Array<{ method: string; url: string; auth: string | undefined; body: string }> = [];
  const s = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, auth: req.headers.authorization, body });
      const [status, json] = reply(req, body);
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
    });
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(s.address() as AddressInfo).port}/base/`;
  return { url, seen, close: () => new Promise<void>((r) => s.close(() => r())) };
}

test('the client should send basic auth or a bearer token, and cache a schema by id', async (t) => {
  const srv = await server(() => [200, { schema: '"string"' }]);
  t.after(srv.close);
  const basic = new RegistryClient({ url: srv.url, auth: { username: 'key', password: 's3cret' } });
  const s = await basic.schemaById(7);
  assert.deepEqual(s, { schemaType: 'AVRO', schema: '"string"', references: [] });
  await basic.schemaById(7);
  assert.equal(srv.seen.length, 1, 'the second lookup of id 7 came from the cache');
  assert.equal(srv.seen[0]!.url, '/base/schemas/ids/7');
  assert.equal(srv.seen[0]!.auth, `Basic ${Buffer.from('key:s3cret').toString('base64')}`);
  await new RegistryClient({ url: srv.url, auth: { bearerToken: 'tok-1' } }).schemaById(8);
  assert.equal(srv.seen[1]!.auth, 'Bearer tok-1');
  await new RegistryClient({ url: srv.url }).schemaById(9);
  assert.equal(srv.seen[2]!.auth, undefined);
  // Credentials in the URL become basic auth; the URL kept (and shown in errors) has none.
  const inUrl = new RegistryClient({ url: srv.url.replace('http://', 'http://k%40y:p%3Aw@') });
  assert.ok(!inUrl.url.includes('p%3Aw') && !inUrl.url.includes('@'), inUrl.url);
  await inUrl.schemaById(10);
  assert.equal(srv.seen[3]!.auth, `Basic ${Buffer.from('k@y:p:w').toString('base64')}`);
});

test('registering should POST schemaType (except for Avro) and fail with the status and the registry message', async (t) => {
  const srv = await server((req) =>
    req.url!.includes('bad')
      ? [409, { error_code: 409, message: 'Incompatible artifact' }]
      : [200, { id: 3 }],
  );
  t.after(srv.close);
  const c = new RegistryClient({ url: srv.url });
  assert.equal(await c.idOf('t-value', 'PROTOBUF', 'syntax = "proto3";', true), 3);
  assert.equal(srv.seen[0]!.url, '/base/subjects/t-value/versions');
  assert.deepEqual(JSON.parse(srv.seen[0]!.body), { schema: 'syntax = "proto3";', schemaType: 'PROTOBUF' });
  assert.equal(await c.idOf('a-value', 'AVRO', '"int"', false), 3);
  assert.equal(srv.seen[1]!.url, '/base/subjects/a-value');
  assert.deepEqual(JSON.parse(srv.seen[1]!.body), { schema: '"int"' });
  await assert.rejects(c.idOf('bad-value', 'AVRO', '"int"', true), (e: unknown) => {
    assert.ok(e instanceof SchemaRegistryError);
    assert.equal(e.code, 'SLUICE_SCHEMA_REGISTRY');
    assert.equal(e.status, 409);
    assert.match(
      e.message,
      /answered 409 to registering an AVRO schema under subject "bad-value".*incompatible.*Incompatible artifact/,
    );
    return true;
  });
});

test('an unreachable registry should be a SchemaRegistryError naming the URL and the reason', async () => {
  const srv = await server(() => [200, {}]);
  await srv.close();
  await assert.rejects(new RegistryClient({ url: srv.url }).subjects(), (e: unknown) => {
    assert.ok(e instanceof SchemaRegistryError);
    assert.match(e.message, /unreachable \(listing subjects\): ECONNREFUSED/);
    assert.equal(e.retriable, true);
    return true;
  });
});

test('schemaRegistry config should be validated: auth pairs, basic or bearer, auth needs a url', () => {
  const problems = (sr: unknown) => {
    try {
      loadConfig({ env: {}, overrides: { schemaRegistry: sr } as never });
      return [];
    } catch (e) {
      assert.ok(e instanceof ConfigError, String(e));
      return e.problems.map((p) => `${p.path}: ${p.message}`);
    }
  };
  assert.deepEqual(problems({ url: 'http://r:8081', auth: { username: 'u', password: 'p' } }), []);
  assert.deepEqual(problems({ url: 'http://r:8081', auth: { bearerToken: 't' } }), []);
  assert.match(
    problems({ url: 'http://r:8081', auth: { username: 'u' } }).join(),
    /schemaRegistry\.auth\.password/,
  );
  assert.match(
    problems({ url: 'http://r:8081', auth: { username: 'u', password: 'p', bearerToken: 't' } }).join(),
    /either basic auth/,
  );
  assert.match(problems({ auth: { bearerToken: 't' } }).join(), /set, but schemaRegistry\.url is not/);
  assert.match(problems({ url: 'ftp://r' }).join(), /schemaRegistry\.url/);
  const c = loadConfig({ env: { SLUICE_SCHEMA_REGISTRY_URL: 'http://r:8081' } });
  assert.equal(c.schemaRegistry.url, 'http://r:8081');
  assert.equal(c.schemaRegistry.autoRegister, true);
  assert.equal(c.schemaRegistry.timeoutMs, 10_000);
});

test('a registry that is not serving should make a batch wait (not dead-letter), an unknown id should be the record', async (t) => {
  // 503 twice for id 1, then its schema; 404 for id 2 always. Start succeeds after two 503s of /subjects.
  let subjects503 = 2;
  let id1Fails = 2;
  const srv = await server((req) => {
    if (req.url === '/base/subjects') return subjects503-- > 0 ? [503, { message: 'starting' }] : [200, []];
    if (req.url === '/base/schemas/ids/1')
      return id1Fails-- > 0 ? [503, { message: 'down' }] : [200, { schema: '"string"' }];
    return [404, { error_code: 40403, message: 'Schema not found' }];
  });
  t.after(srv.close);
  const app = new App({ id: 'wait-test' });
  const serde = avro<string>();
  app.stream('in', { value: serde });
  const cfg = { schemaRegistry: { url: srv.url, auth: {}, autoRegister: true, timeoutMs: 2000 } };
  // Without a wait (the TestDriver, a tool) a 503 at start is an error; with one it is waited out.
  await assert.rejects(prepareSchemas(app.topology(), cfg), /answered 503 to listing subjects/);
  const warnings: string[] = [];
  const logger = { warn: (_o: unknown, m: string) => warnings.push(m), info: () => {} } as never;
  const prefetch = await prepareSchemas(app.topology(), cfg, { wait: { logger, stopping: () => false } });
  assert.equal(warnings.length, 1, 'the one 503 left at start was retried, with a warning');
  const rec = (id: number) =>
    ({ key: null, value: Buffer.from([0, 0, 0, 0, id, 2, 0x61]), offset: '0' }) as unknown as InRecord;
  let ran = 0;
  const then = async () => {
    ran++;
  };
  const t0 = Date.now();
  await prefetch.before('in', [rec(1)], then);
  assert.equal(ran, 0, 'not processed while the registry answers 503');
  assert.equal(prefetch.outage()?.status, 503);
  assert.ok(Date.now() - t0 >= 150, 'the batch sat out the first backoff (200 ms)');
  const asked = srv.seen.length;
  const t1 = Date.now();
  await prefetch.before('in', [rec(1)], then, { stopping: () => true });
  assert.equal(ran, 0);
  assert.ok(Date.now() - t1 < 150, 'a stopping worker does not wait');
  assert.equal(srv.seen.length, asked, 'nor asks the registry for a batch it drops');
  let why: SchemaRegistryError | undefined;
  const t2 = Date.now();
  await prefetch.before('in', [rec(1)], then, { backoff: false, waiting: (e) => (why = e) });
  assert.equal(ran, 0);
  assert.equal(why?.status, 503, 'the caller is told why the batch waits');
  assert.ok(Date.now() - t2 < 150, 'without the backoff when asked');
  await prefetch.before('in', [rec(1)], then);
  assert.equal(ran, 1, 'processed once the registry serves the schema');
  assert.equal(prefetch.outage(), undefined);
  assert.equal(serde.deserialize(rec(1).value), 'a');
  // 404 with the registry's code: it answered about the id, so it is the record's (the error policy's).
  await prefetch.before('in', [rec(2)], then);
  assert.equal(ran, 2);
  assert.throws(() => serde.deserialize(rec(2).value), /cannot read schema id 2: .*answered 404/);
  // The classification itself.
  const err = (opts: ConstructorParameters<typeof SchemaRegistryError>[1]) =>
    new SchemaRegistryError('x', opts);
  const cases: Array<[string, ConstructorParameters<typeof SchemaRegistryError>[1], boolean, boolean]> = [
    ['refused, timed out', { unreachable: true }, true, true],
    ['a mistake of the job (no status, reached)', {}, false, false],
    ['500', { status: 500 }, true, true],
    ['503', { status: 503 }, true, true],
    ['408', { status: 408 }, true, true],
    ['429', { status: 429 }, true, true],
    ['401', { status: 401 }, false, true],
    ['403', { status: 403 }, false, true],
    ['404 from the registry', { status: 404, registryCode: 40403 }, false, false],
    ['404 without a registry code (a proxy)', { status: 404 }, false, true],
    ['409', { status: 409, registryCode: 409 }, false, false],
    ['422', { status: 422, registryCode: 42201 }, false, false],
  ];
  for (const [what, opts, unavailable, notRecords] of cases) {
    assert.equal(registryUnavailable(err(opts)), unavailable, `${what}: unavailable`);
    assert.equal(notTheRecords(err(opts)), notRecords, `${what}: not the record's`);
    assert.equal(err(opts).retriable, unavailable, `${what}: retriable`);
  }
});

test('an answer without a schema, or not JSON, should be the registry not serving, and not be cached', async (t) => {
  let calls = 0;
  const srv = await server(() => (++calls === 1 ? [200, {}] : [200, { schema: '"string"' }]));
  t.after(srv.close);
  const c = new RegistryClient({ url: srv.url });
  await assert.rejects(c.schemaById(5), (e: unknown) => {
    assert.ok(registryUnavailable(e), String(e));
    assert.match(String(e), /answered schema id 5 without a schema/);
    return true;
  });
  assert.equal((await c.schemaById(5)).schema, '"string"', 'asked again, not the cached failure');
  // A page that is not JSON (a proxy's): not serving either.
  const html = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>'));
  await new Promise<void>((r) => html.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => html.close(() => r())));
  const page = new RegistryClient({ url: `http://127.0.0.1:${(html.address() as AddressInfo).port}` });
  await assert.rejects(page.schemaById(1), (e: unknown) => registryUnavailable(e));
});

test("a registry's Retry-After should be read (seconds or a date) and waited out, at start and before a batch", async (t) => {
  const now = Date.parse('2026-12-07T12:00:00Z');
  assert.equal(retryAfterMs(null, now), undefined);
  assert.equal(retryAfterMs('3', now), 3000);
  assert.equal(retryAfterMs(' 0 ', now), 0);
  assert.equal(retryAfterMs('Mon, 07 Dec 2026 12:00:02 GMT', now), 2000);
  assert.equal(retryAfterMs('Mon, 07 Dec 2026 11:00:00 GMT', now), 0, 'a date already past');
  assert.equal(retryAfterMs('Monday, 07-Dec-26 12:00:05 GMT', now), 5000, 'RFC 850');
  assert.equal(retryAfterMs('Mon Dec  7 12:00:04 2026', now), 4000, 'asctime, GMT by definition');
  assert.equal(retryAfterMs('soon', now), undefined);
  assert.equal(retryAfterMs('foo 12', now), undefined);
  assert.equal(retryAfterMs('-1', now), undefined);
  assert.equal(retryAfterMs('1.5', now), undefined);
  assert.equal(retryAfterMs('9'.repeat(40), now), undefined, 'no absurd number');
  // /subjects: one 503 asking for 1 s (the start's own first backoff is 500 ms); id 1: one 429
  // asking for 1 s (a batch's first backoff is 200 ms), then the schema.
  let subjects = 1;
  let id1 = 1;
  const s = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/base/subjects' && subjects-- > 0)
        res.writeHead(503, { 'retry-after': '1' }).end('{"message":"warming up"}');
      else if (req.url === '/base/subjects') res.writeHead(200).end('[]');
      else if (req.url === '/base/schemas/ids/1' && id1-- > 0)
        res.writeHead(429, { 'retry-after': '1' }).end('{"message":"slow down"}');
      else res.writeHead(200).end('{"schema":"\\"string\\""}');
    });
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => s.close(() => r())));
  const url = `http://127.0.0.1:${(s.address() as AddressInfo).port}/base/`;
  const app = new App({ id: 'retry-after' });
  const serde = avro<string>();
  app.stream('in', { value: serde });
  const cfg = { schemaRegistry: { url, auth: {}, autoRegister: true, timeoutMs: 2000 } };
  const logger = { warn: () => {}, info: () => {} } as never;
  const t0 = Date.now();
  const prefetch = await prepareSchemas(app.topology(), cfg, { wait: { logger, stopping: () => false } });
  assert.ok(Date.now() - t0 >= 950, `start waited the 1 s asked for (${Date.now() - t0} ms)`);
  const rec = { key: null, value: Buffer.from([0, 0, 0, 0, 1, 2, 0x61]), offset: '0' } as unknown as InRecord;
  let ran = 0;
  const then = async () => {
    ran++;
  };
  let why: SchemaRegistryError | undefined;
  const t1 = Date.now();
  await prefetch.before('in', [rec], then, { waiting: (e) => (why = e) });
  assert.equal(ran, 0, 'not processed on the 429');
  assert.equal(why?.status, 429);
  assert.equal(why?.retryAfterMs, 1000);
  assert.ok(Date.now() - t1 >= 950, `the batch waited the 1 s asked for (${Date.now() - t1} ms)`);
  await prefetch.before('in', [rec], then);
  assert.equal(ran, 1, 'processed once served');
});

test("a Retry-After longer than a batch's longest backoff should hold the schema unasked, and the batch's wait should stay short", async (t) => {
  let asked = 0;
  const s = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/base/subjects') return res.writeHead(200).end('[]');
      asked++;
      res.writeHead(503, { 'retry-after': '30' }).end('{"message":"maintenance"}');
    });
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => s.close(() => r())));
  const url = `http://127.0.0.1:${(s.address() as AddressInfo).port}/base/`;
  const app = new App({ id: 'retry-after-hold' });
  app.stream('in', { value: avro<string>() });
  const cfg = { schemaRegistry: { url, auth: {}, autoRegister: true, timeoutMs: 2000 } };
  const logger = { warn: () => {}, info: () => {} } as never;
  const prefetch = await prepareSchemas(app.topology(), cfg, { wait: { logger, stopping: () => false } });
  const rec = { key: null, value: Buffer.from([0, 0, 0, 0, 1, 2, 0x61]), offset: '0' } as unknown as InRecord;
  const never = async () => assert.fail('not processed while the registry is down');
  const whys: Array<number | undefined> = [];
  await prefetch.before('in', [rec], never, { backoff: false, waiting: (e) => whys.push(e.status) });
  assert.equal(asked, 1);
  // Fetched again at once (a test driver's pace): held, not asked, the caller told why.
  await prefetch.before('in', [rec], never, { backoff: false, waiting: (e) => whys.push(e.status) });
  await prefetch.before('in', [rec], never, { backoff: false, waiting: (e) => whys.push(e.status) });
  assert.equal(asked, 1, 'the registry is not asked again before its Retry-After');
  assert.deepEqual(whys, [503, 503, 503]);
  // With the backoff, the batch's wait is capped (a rebalance waits for every batch handler).
  const t0 = Date.now();
  let stop = false;
  setTimeout(() => (stop = true), 6_000).unref();
  await prefetch.before('in', [rec], never, { stopping: () => stop });
  const waited = Date.now() - t0;
  assert.ok(
    waited < 5_900,
    `the batch waited ${waited} ms, within the 5 s backoff cap, not the 30 s asked for`,
  );
  assert.equal(asked, 1);
});
