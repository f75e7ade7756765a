import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config/load.js';
import { SerdeError } from '../../src/errors.js';
import {
  App,
  avro,
  json,
  jsonSchema,
  protobuf,
  type RunningWorker,
  SchemaRegistryError,
  startWorker,
  valueState,
} from '../../src/index.js';
import type { InRecord } from '../../src/kafka/types.js';
import { prepareSchemas } from '../../src/registry/prepare.js';
import { DLQ_HEADERS } from '../../src/runtime/dead-letter.js';
import {
  createTopics,
  deleteTopicsMatching,
  jobTopics,
  produce,
  readAll,
  testKafka,
  uniqueName,
} from '../helpers/kafka.js';
import { freePort } from '../helpers/ports.js';
import { registerDirect, setCompatibility, startRegistry, type TestRegistry } from '../helpers/registry.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { spawnWorker } from '../helpers/workers.js';

/**
 * The Schema Registry serdes against a real registry (Apicurio Registry from Maven Central, started
 * once for this file), and in a worker against the real broker. "Another client" registers through
 * the registry's REST API and writes bytes framed and encoded by hand here (Avro's and Protobuf's
 * binary encodings of small records written out byte by byte), so a shared bug of the serde and
 * its codec library cannot pass for a round trip.
 */
/** The job as a user runs it: its TypeScript source (tsx), not the compiled copy in dist/. */
const JOB_TS = fileURLToPath(new URL('../../../test/fixtures/jobs/registry.ts', import.meta.url));

let reg: TestRegistry;
before(async () => {
  reg = await startRegistry();
});
after(() => reg?.stop());

const config = (url = reg.url, autoRegister = true) => ({
  schemaRegistry: { url, auth: {}, autoRegister, timeoutMs: 5000 },
});

/** The Confluent frame, by hand. */
function framed(id: number, ...parts: Array<number[] | Buffer>): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(id, 1);
  return Buffer.concat([head, ...parts.map((p) => Buffer.from(p))]);
}
/** Avro/Protobuf varint of a non-negative number below 2^28. */
function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}
const zigzag = (n: number) => varint(n >= 0 ? n * 2 : -n * 2 - 1);
/** Avro string: zig-zag length, then UTF-8. */
const avroString = (s: string) => [...zigzag(Buffer.byteLength(s)), ...Buffer.from(s)];

async function latestId(subject: string): Promise<number> {
  const r = await fetch(`${reg.url}/subjects/${encodeURIComponent(subject)}/versions/latest`);
  assert.equal(r.status, 200, `subject ${subject} exists`);
  return ((await r.json()) as { id: number }).id;
}

/** Reads `bytes` as a worker would: the pre-batch fetch, then the synchronous deserialize. */
async function readAs<T>(
  prefetch: Awaited<ReturnType<typeof prepareSchemas>>,
  topic: string,
  serde: { deserialize(b: Buffer | null): T },
  bytes: Buffer,
): Promise<T> {
  const r = { key: null, value: bytes, offset: '0', timestamp: '0' } as unknown as InRecord;
  await prefetch.before(topic, [r], async () => {});
  return serde.deserialize(bytes);
}

const USER = {
  type: 'record',
  name: 'User',
  namespace: 'test.sluice',
  fields: [
    { name: 'id', type: 'int' },
    { name: 'name', type: 'string' },
  ],
};

test('Avro: written by the serde and registered at start, read back; bytes of another client read too', async () => {
  const p = uniqueName('sr-avro');
  const writer = avro<{ id: number; name: string }>({ schema: USER });
  const reader = avro<{ id: number; name: string }>();
  const app = new App({ id: p });
  const s = app.stream(`${p}-in`, { value: reader });
  s.to(`${p}-out`, { value: writer });
  const tr = avro<{ id: number; name: string }>({ schema: USER, subjectNameStrategy: 'topic-record' });
  s.to(`${p}-tr`, { value: tr });
  const prefetch = await prepareSchemas(app.topology(), config());
  // Registered under the topic strategy's subject at start…
  const id = await latestId(`${p}-out-value`);
  // …and under <topic>-<namespace.name> by the topic-record strategy.
  assert.equal(
    tr.serialize({ id: 1, name: 'a' })!.readUInt32BE(1),
    await latestId(`${p}-tr-test.sluice.User`),
  );
  const bytes = writer.serialize({ id: -3, name: 'Zoë' })!;
  // Checked by hand: header, then int -3 (zig-zag 5), then the string.
  assert.deepEqual([...bytes], [...framed(id, zigzag(-3), avroString('Zoë'))]);
  assert.deepEqual({ ...(await readAs(prefetch, `${p}-in`, reader, bytes)) }, { id: -3, name: 'Zoë' });
  // Known ids: the batch goes straight on (then's own result, no Promise in between); an id not
  // seen yet is fetched first.
  const r = { key: null, value: bytes, offset: '0', timestamp: '0' } as unknown as InRecord;
  const done = Promise.resolve();
  assert.equal(
    prefetch.before(`${p}-in`, [r], () => done),
    done,
  );
  // Another client: registers through the REST API, encodes by hand.
  // (A schema text of its own: Apicurio gives the same text the same id under any subject.)
  const other = await registerDirect(reg.url, `${p}-in-value`, JSON.stringify({ ...USER, doc: p }));
  assert.equal(other.status, 200);
  const theirs = framed(other.body.id!, zigzag(1234), avroString('from elsewhere'));
  const r2 = { key: null, value: theirs, offset: '1', timestamp: '0' } as unknown as InRecord;
  assert.notEqual(
    prefetch.before(`${p}-in`, [r2], () => done),
    done,
    'a new id is fetched first',
  );
  assert.deepEqual(
    { ...(await readAs(prefetch, `${p}-in`, reader, theirs)) },
    { id: 1234, name: 'from elsewhere' },
  );
  // A value that does not match the schema is the serde's error, not a crash.
  assert.throws(() => writer.serialize({ id: 'x' } as never), SerdeError);
});

const PROTO = `syntax = "proto3";
package shop;
message Order {
  string id = 1;
  int32 qty = 2;
  message Line { string sku = 1; }
}
enum Kind { A = 0; }
message Refund {
  string id = 1;
  int64 cents = 2;
}
`;

test('Protobuf: message indexes of the second message, a nested one, and bytes of another client', async () => {
  const p = uniqueName('sr-proto');
  const refunds = protobuf<{ id: string; cents: string }>({ schema: PROTO, messageType: 'shop.Refund' });
  const lines = protobuf<{ sku: string }>({ schema: PROTO, messageType: 'shop.Order.Line' });
  const reader = protobuf<Record<string, unknown>>();
  const app = new App({ id: p });
  const s = app.stream(`${p}-in`, { value: reader });
  s.to(`${p}-refunds`, { value: refunds });
  s.to(`${p}-lines`, { value: lines });
  const events = protobuf<Record<string, unknown>>({
    schema:
      'syntax = "proto3";\npackage ev;\nimport "google/protobuf/timestamp.proto";\n' +
      'message E { string id = 1; google.protobuf.Timestamp at = 2; }\n',
  });
  s.to(`${p}-events`, { value: events });
  const prefetch = await prepareSchemas(app.topology(), config());
  const id = await latestId(`${p}-refunds-value`);
  const bytes = refunds.serialize({ id: 'r1', cents: '5000000000' })!;
  // Message indexes [1] (count 1 → 2, index 1 → 2); then field 1 (tag 0x0a) and field 2 (tag 0x10).
  assert.deepEqual(
    [...bytes],
    [...framed(id, [2, 2], [0x0a, 2, ...Buffer.from('r1')], [0x10, ...int64Varint(5_000_000_000n)])],
  );
  assert.deepEqual(await readAs(prefetch, `${p}-in`, reader, bytes), { id: 'r1', cents: '5000000000' });
  const lineBytes = lines.serialize({ sku: 'S-9' })!;
  // The nested Order.Line: indexes [0, 0] → count 2 (4), 0, 0.
  assert.deepEqual([...lineBytes.subarray(5, 8)], [4, 0, 0]);
  assert.deepEqual(await readAs(prefetch, `${p}-in`, reader, lineBytes), { sku: 'S-9' });
  // Another client: the first message ([0] as the single byte 0), encoded by hand.
  const other = await registerDirect(reg.url, `${p}-in-value`, PROTO, 'PROTOBUF');
  assert.equal(other.status, 200, JSON.stringify(other.body));
  const theirs = framed(other.body.id!, [0], [0x0a, 2, ...Buffer.from('o7'), 0x10, 3]);
  assert.deepEqual(await readAs(prefetch, `${p}-in`, reader, theirs), { id: 'o7', qty: 3 });
  // A well-known type import: registered as it is, read back.
  const ev = { id: 'e', at: { seconds: '1700000000', nanos: 7 } };
  assert.deepEqual(await readAs(prefetch, `${p}-in`, reader, events.serialize(ev)!), ev);
  // Field 2 sent as a string where Refund wants an int64: refused before writing.
  assert.throws(() => refunds.serialize({ id: 'r', cents: 'lots' }), SerdeError);
});

function int64Varint(n: bigint): number[] {
  const out: number[] = [];
  while (n > 0x7fn) {
    out.push(Number(n & 0x7fn) | 0x80);
    n >>= 7n;
  }
  out.push(Number(n));
  return out;
}

test('JSON Schema: the record strategy names the subject by title; both sides validate', async () => {
  const p = uniqueName('sr-json');
  const schema = {
    title: `${p.replace(/-/g, '_')}.Thing`,
    type: 'object',
    properties: { a: { type: 'string' }, n: { type: 'integer' } },
    required: ['a'],
  };
  const writer = jsonSchema<{ a: string; n?: number }>({ schema, subjectNameStrategy: 'record' });
  const reader = jsonSchema<{ a: string; n?: number }>();
  const app = new App({ id: p });
  app.stream(`${p}-in`, { value: reader }).to(`${p}-out`, { value: writer });
  const prefetch = await prepareSchemas(app.topology(), config());
  const id = await latestId(schema.title);
  const bytes = writer.serialize({ a: 'x', n: 2 })!;
  assert.deepEqual(bytes, framed(id, Buffer.from('{"a":"x","n":2}')));
  assert.deepEqual(await readAs(prefetch, `${p}-in`, reader, bytes), { a: 'x', n: 2 });
  assert.throws(
    () => writer.serialize({ n: 1 } as never),
    /does not match the schema.*must have required property 'a'/,
  );
  // Another client wrote JSON that breaks its own registered schema: the reader refuses it.
  const other = await registerDirect(reg.url, `${p}-in-value`, JSON.stringify(schema), 'JSON');
  assert.equal(other.status, 200, JSON.stringify(other.body));
  const good = framed(other.body.id!, Buffer.from('{"a":"hand"}'));
  assert.deepEqual(await readAs(prefetch, `${p}-in`, reader, good), { a: 'hand' });
  await assert.rejects(
    readAs(prefetch, `${p}-in`, reader, framed(other.body.id!, Buffer.from('{"a":1}'))),
    /JSON does not match schema id \d+: data\/a must be string/,
  );
});

test('schema evolution: a compatible change is registered and reads old records; an incompatible one is refused at start', async () => {
  const p = uniqueName('sr-evo');
  const topic = `${p}-events`;
  await setCompatibility(reg.url, `${topic}-value`, 'BACKWARD');
  const v1 = JSON.stringify(USER);
  const old = await registerDirect(reg.url, `${topic}-value`, v1);
  assert.equal(old.status, 200);
  const v2 = { ...USER, fields: [...USER.fields, { name: 'tier', type: 'string', default: 'free' }] };
  const writer = avro<Record<string, unknown>>({ schema: v2 });
  const reader = avro<Record<string, unknown>>({ schema: v2 });
  const app = new App({ id: p });
  app.stream(topic, { value: reader }).to(`${p}-copy`, { value: avro({ schema: v2 }) });
  app.stream(`${p}-other`, { value: json<any>() }).to(topic, { value: writer });
  const prefetch = await prepareSchemas(app.topology(), config());
  const v2id = await latestId(`${topic}-value`);
  assert.notEqual(v2id, old.body.id, 'v2 registered as a new version');
  // A v1 record (by hand) read with the v2 reader schema: the default fills the new field.
  const v1bytes = framed(old.body.id!, zigzag(1), avroString('ann'));
  assert.deepEqual(
    { ...(await readAs(prefetch, topic, reader, v1bytes)) },
    { id: 1, name: 'ann', tier: 'free' },
  );
  const v2bytes = writer.serialize({ id: 2, name: 'bob', tier: 'gold' })!;
  assert.equal(v2bytes.readUInt32BE(1), v2id);
  assert.deepEqual(
    { ...(await readAs(prefetch, topic, reader, v2bytes)) },
    { id: 2, name: 'bob', tier: 'gold' },
  );

  // v3 changes a field's type with no default: BACKWARD refuses it, at start, with the registry's reason.
  const v3 = { ...USER, fields: [{ name: 'id', type: 'string' }, USER.fields[1]] };
  const app3 = new App({ id: `${p}-3` });
  app3.stream(`${p}-other`, { value: json<any>() }).to(topic, { value: avro({ schema: v3 }) });
  await assert.rejects(prepareSchemas(app3.topology(), config()), (e: unknown) => {
    assert.ok(e instanceof SchemaRegistryError, String(e));
    assert.equal(e.code, 'SLUICE_SCHEMA_REGISTRY');
    assert.equal(e.status, 409);
    assert.match(
      e.message,
      new RegExp(`registering an AVRO schema under subject "${topic}-value".*incompatible`),
    );
    return true;
  });
  // Auto-registration off: a schema the subject lacks is a clear error, one it holds is found.
  const app4 = new App({ id: `${p}-4` });
  app4.stream(`${p}-other`, { value: json<any>() }).to(topic, { value: avro({ schema: v3 }) });
  await assert.rejects(
    prepareSchemas(app4.topology(), config(reg.url, false)),
    /answered 404 to looking up an AVRO schema under subject .* \(not registered under this subject, and auto-registration is off\)/,
  );
  const app5 = new App({ id: `${p}-5` });
  const found = avro({ schema: USER, autoRegister: false });
  app5.stream(`${p}-other`, { value: json<any>() }).to(topic, { value: found });
  await prepareSchemas(app5.topology(), config(reg.url, true));
  assert.equal(found.serialize({ id: 1, name: 'x' })!.readUInt32BE(1), old.body.id);
});

test('one serde object writing under two subjects, or in a store, is refused at start', async () => {
  const p = uniqueName('sr-misuse');
  const shared = avro({ schema: USER });
  const app = new App({ id: p });
  const s = app.stream(`${p}-in`, { value: json<any>() });
  s.to(`${p}-a`, { value: shared });
  s.to(`${p}-b`, { value: shared });
  await assert.rejects(prepareSchemas(app.topology(), config()), /writes under two subjects/);
  // A worker waits for a registry that is not serving, not for a mistake of the job's.
  const wait = { logger: { warn: () => {}, info: () => {} } as never, stopping: () => false };
  await assert.rejects(prepareSchemas(app.topology(), config(), { wait }), /writes under two subjects/);
  const app2 = new App({ id: `${p}-2` });
  app2.stream(`${p}-in`, { value: avro() });
  await assert.rejects(
    prepareSchemas(app2.topology(), { schemaRegistry: { ...config().schemaRegistry, url: undefined } }),
    /schemaRegistry\.url is not set/,
  );
  const app3 = new App({ id: `${p}-3` });
  app3
    .stream(`${p}-in`, { value: json<{ k: string }>() })
    .keyBy((v) => v.k)
    .process({
      state: { last: valueState(avro({ schema: USER })) },
      onRecord(_v, ctx) {
        ctx.state.last.set({ id: 1, name: 'x' });
      },
    });
  await assert.rejects(
    prepareSchemas(app3.topology(), config()),
    /has a Schema Registry serde \(avro\(\)\): registry serdes are for topics/,
  );
});

test('an unknown schema id and an unreachable registry make the record a SerdeError that says so', async () => {
  const p = uniqueName('sr-unknown');
  const reader = avro();
  const app = new App({ id: p });
  app.stream(`${p}-in`, { value: reader });
  const prefetch = await prepareSchemas(app.topology(), config());
  await assert.rejects(
    readAs(prefetch, `${p}-in`, reader, framed(987_654, [2])),
    /cannot read schema id 987654: schema registry .* answered 404 to schema id 987654/,
  );
  // A registry that is down: prepared against a port nobody listens on fails at start…
  const dead = `http://127.0.0.1:${await closedPort()}/apis/ccompat/v7`;
  const app2 = new App({ id: `${p}-2` });
  app2.stream(`${p}-in`, { value: avro() });
  await assert.rejects(prepareSchemas(app2.topology(), config(dead)), (e: unknown) => {
    assert.ok(e instanceof SchemaRegistryError);
    assert.equal(e.code, 'SLUICE_SCHEMA_REGISTRY');
    assert.match(
      e.message,
      /^schema registry http:\/\/127\.0\.0\.1:\d+\/apis\/ccompat\/v7 unreachable \(listing subjects\): ECONNREFUSED$/,
    );
    return true;
  });
});

test('`sluice run` of a job file with registry serdes: records through, poison to the DLQ, no url a clear error', {
  timeout: 120_000,
}, async (t) => {
  const { id, input, output, env } = await jobTopics('t-srcli', 1);
  t.after(() => deleteTopicsMatching(id));
  const inId = (await registerDirect(reg.url, `${input}-value`, JSON.stringify(USER))).body.id!;
  await produce(input, [
    { key: 'a', value: framed(inId, zigzag(1), avroString('ann')) },
    { key: 'b', value: Buffer.from('not avro') },
  ]);
  const w = spawnWorker(JOB_TS, { name: 'sr-cli', env: { ...env, SLUICE_SCHEMA_REGISTRY_URL: reg.url } });
  t.after(() => w.kill('SIGTERM'));
  const out = await readBytes(output, 1);
  assert.deepEqual(
    out[0]?.value,
    framed(await latestId(`${output}-value`), zigzag(1), avroString('ANN')),
    w.logs.slice(-10).join('\n'),
  );
  const dlq = await readAll(`${id}-dlq`, { expected: 1, settleMs: 300 });
  assert.match(dlq[0]!.headers[DLQ_HEADERS.errorMessage]!, /not the magic byte/);
  assert.equal(await w.kill('SIGTERM'), 0);
  // The same job without schemaRegistry.url: exit 1 with the reason, not a worker that never finds its serdes.
  const bad = spawnWorker(JOB_TS, { name: 'sr-cli-nourl', env });
  assert.equal(await bad.exited, 1);
  assert.ok(
    bad.logs.some((l) => l.includes('schemaRegistry.url is not set')),
    bad.logs.slice(-10).join('\n'),
  );
});

test('a worker: poison bytes, an unknown id and a truncated record go to the DLQ; a registry refusing connections, frozen, or down at start costs latency, not records', {
  timeout: 180_000,
}, async (t) => {
  const id = uniqueName('t-sr');
  const input = `${id}-in`;
  const output = `${id}-out`;
  await createTopics([
    { topic: input, partitions: 1 },
    { topic: output, partitions: 1 },
  ]);
  let w: RunningWorker | undefined;
  // The worker reaches the registry through a proxy the test can cut; the test registers directly.
  const proxy = new TcpProxy(await freePort(), reg.port);
  await proxy.heal();
  t.after(async () => {
    reg.thaw();
    await proxy.heal();
    await w?.stop();
    await proxy.cut();
    await deleteTopicsMatching(id);
  });
  const inId = (await registerDirect(reg.url, `${input}-value`, JSON.stringify(USER))).body.id!;
  // Keys too: an Avro string, registered under <topic>-key by the other client.
  const keyInId = (await registerDirect(reg.url, `${input}-key`, '"string"')).body.id!;
  const key = framed(keyInId, avroString('k'));
  const app = new App({ id });
  app
    .stream(input, { key: avro<string>(), value: avro<{ id: number; name: string }>({ schema: USER }) })
    .map((u) => ({ ...u, name: u.name.toUpperCase() }))
    .to(output, { key: avro<string>({ schema: '"string"' }), value: avro({ schema: USER }) });
  const cfg = () =>
    loadConfig({
      env: { KAFKA_BROKERS: process.env.KAFKA_BROKERS },
      overrides: {
        http: { enabled: false },
        log: { level: 'silent', format: 'json' },
        state: { dir: mkdtempSync(join(tmpdir(), 'sluice-')) },
        schemaRegistry: { url: `http://127.0.0.1:${proxy.listenPort}/apis/ccompat/v7`, timeoutMs: 1500 },
      },
    });
  w = await startWorker(app, cfg());
  const outId = await latestId(`${output}-value`);
  const keyOut = framed(await latestId(`${output}-key`), avroString('k'));
  const good = (n: number, name: string) => framed(inId, zigzag(n), avroString(name));
  const producer = testKafka().producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  t.after(() => producer.disconnect());
  const send = (values: Buffer[]) =>
    producer.send({ topic: input, acks: -1, messages: values.map((value) => ({ key, value })) });
  await send([
    good(1, 'ann'),
    Buffer.from('{"not":"avro"}'),
    framed(999_999, zigzag(2), avroString('x')),
    framed(inId, zigzag(3)), // the string is missing
    good(4, 'dan'),
  ]);
  // Compare the bytes: the output is framed with the output subject's id, encoded by hand.
  const outRecords = await readBytes(output, 2);
  assert.deepEqual(
    outRecords.map((r) => r.key),
    [keyOut, keyOut],
  );
  const outBytes = outRecords.map((r) => r.value);
  assert.deepEqual(outBytes, [
    framed(outId, zigzag(1), avroString('ANN')),
    framed(outId, zigzag(4), avroString('DAN')),
  ]);
  const dlq1 = await readAll(`${id}-dlq`, { expected: 3, settleMs: 500 });
  assert.deepEqual(
    dlq1.map((r) => r.headers[DLQ_HEADERS.errorMessage]),
    [
      'not in the Schema Registry wire format: first byte 0x7b, not the magic byte 0x00',
      dlq1[1]!.headers[DLQ_HEADERS.errorMessage]!.match(
        /^cannot read schema id 999999: .*answered 404.*$/,
      )?.[0],
      dlq1[2]!.headers[DLQ_HEADERS.errorMessage]!.match(/^cannot read AVRO with schema id \d+: .*$/)?.[0],
    ],
  );
  assert.ok(
    dlq1.every(
      (r) =>
        r.headers[DLQ_HEADERS.errorClass] === 'SerdeError' &&
        r.headers[DLQ_HEADERS.errorKind] === 'deserialize',
    ),
    JSON.stringify(dlq1.map((r) => r.headers)),
  );

  // Outputs and dead letters as they stand after `ms` more: nothing may move during an outage.
  const after = async (ms: number) => {
    await new Promise((r) => setTimeout(r, ms));
    return {
      out: (await readAll(output, { settleMs: 300, timeoutMs: 5_000 })).length,
      dlq: (await readAll(`${id}-dlq`, { settleMs: 300, timeoutMs: 5_000 })).length,
    };
  };
  const v2 = { ...USER, fields: [...USER.fields, { name: 'tier', type: 'string', default: 'free' }] };
  const v3 = { ...v2, fields: [...v2.fields, { name: 'plan', type: 'string', default: 'basic' }] };

  // 1. Connections refused: a record with an id the worker has not fetched waits, and so does
  // the record behind it (same partition, known id): order holds. No dead letter; when the
  // registry answers again, both come out.
  const id2 = (await registerDirect(reg.url, `${input}-value`, JSON.stringify(v2))).body.id!;
  await proxy.cut();
  await send([framed(id2, zigzag(5), avroString('eve'), avroString('gold')), good(6, 'fay')]);
  assert.deepEqual(await after(4_000), { out: 2, dlq: 3 }, 'nothing moves while the registry refuses');
  assert.equal(w.worker.lag.get(`${input}:0`), 2, 'the two waiting records count as lag');
  await proxy.heal();
  const out2 = (await readBytes(output, 4)).map((r) => r.value);
  assert.deepEqual(out2.slice(2), [
    framed(outId, zigzag(5), avroString('EVE')),
    framed(outId, zigzag(6), avroString('FAY')),
  ]);

  // 2. The registry frozen (SIGSTOP): connections open, no answer; each fetch times out (1.5 s).
  const id3 = (await registerDirect(reg.url, `${input}-value`, JSON.stringify(v3))).body.id!;
  reg.freeze();
  await send([
    framed(id3, zigzag(7), avroString('gus'), avroString('gold'), avroString('pro')),
    good(8, 'hal'),
  ]);
  assert.deepEqual(await after(5_000), { out: 4, dlq: 3 }, 'nothing moves while the registry is frozen');
  reg.thaw();
  const out3 = (await readBytes(output, 6)).map((r) => r.value);
  assert.deepEqual(out3.slice(4), [
    framed(outId, zigzag(7), avroString('GUS')),
    framed(outId, zigzag(8), avroString('HAL')),
  ]);
  await w.stop();
  w = undefined;

  // 3. A worker started while the registry refuses waits for it (as for Kafka), then runs.
  await proxy.cut();
  let started: RunningWorker | undefined;
  const starting = startWorker(app, cfg()).then((x) => {
    started = x;
    return x;
  });
  t.after(() => starting.then((x) => x.stop()).catch(() => undefined));
  await send([good(9, 'ivy')]);
  await new Promise((r) => setTimeout(r, 3_000));
  assert.equal(started, undefined, 'the worker waits at start while the registry refuses');
  await proxy.heal();
  w = await starting;
  const out4 = (await readBytes(output, 7)).map((r) => r.value);
  assert.deepEqual(out4.slice(6), [framed(outId, zigzag(9), avroString('IVY'))]);
  assert.equal((await readAll(`${id}-dlq`, { settleMs: 300, timeoutMs: 5_000 })).length, 3);
  assert.ok(proxy.accepted > 0, 'the worker went through the proxy');
});

/** Keys and values of a topic as bytes (read_committed), in offset order. */
async function readBytes(
  topic: string,
  expected: number,
): Promise<Array<{ key: Buffer | null; value: Buffer }>> {
  const c = testKafka().consumer({ groupId: uniqueName('bytes'), maxWaitTimeInMs: 100 });
  const out: Array<{ key: Buffer | null; value: Buffer }> = [];
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  await c.run({
    eachMessage: async ({ message }) => {
      out.push({ key: message.key, value: message.value! });
    },
  });
  const deadline = Date.now() + 60_000;
  while (out.length < expected && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  await c.disconnect();
  return out;
}

/** A port nobody listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}
