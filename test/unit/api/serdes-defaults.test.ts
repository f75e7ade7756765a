/**
 * What the DSL's default serdes write, so that the types and the bytes agree: a stream read
 * without serdes is bytes in, bytes out; a keyBy key is text only when it is a string, and keeps
 * its type with a key serde; a Buffer made by a map is written as its bytes.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SerdeError } from '../../../src/errors.js';
import { App, json, number, string, tumbling } from '../../../src/index.js';
import type { GraphNode } from '../../../src/topology/nodes.js';

function sink(app: App, topic: string) {
  const n = app.graph.nodes.find((x: GraphNode) => x.spec.kind === 'sink' && x.spec.topic === topic);
  assert.ok(n && n.spec.kind === 'sink', `a sink to ${topic}`);
  return n.spec;
}

test('a stream without serdes should write its values as the bytes it read', () => {
  const app = new App({ id: 'bytes' });
  app
    .stream('in')
    .filter((b) => b.length > 0)
    .to('out');
  const bytes = Buffer.from([0, 1, 0xff]);
  assert.deepEqual(sink(app, 'out').value.serialize(bytes), bytes);
});

test('a string-valued stream should write its strings as text, not as JSON strings', () => {
  const app = new App({ id: 'text' });
  app
    .stream('in', { value: string() })
    .peek(() => undefined)
    .to('out');
  assert.equal(sink(app, 'out').value.serialize('héllo')!.toString('utf8'), 'héllo');
});

test('after a map the value serde should be JSON, with a Buffer written as its bytes', () => {
  const app = new App({ id: 'mapped' });
  const s = app.stream('in');
  s.map((b) => ({ n: b.length })).to('json-out');
  s.map((b) => Buffer.concat([b, b])).to('bytes-out');
  assert.equal(sink(app, 'json-out').value.serialize({ n: 2 })!.toString(), '{"n":2}');
  assert.deepEqual(sink(app, 'bytes-out').value.serialize(Buffer.from([7, 7])), Buffer.from([7, 7]));
});

test('keyBy of a bytes stream should repartition the bytes, not their JSON', () => {
  const app = new App({ id: 'rekey-bytes' });
  app
    .stream('in')
    .keyBy((b) => b.toString('hex'), { name: 'hex' })
    .to('out');
  const rep = sink(app, 'rekey-bytes-hex-repartition');
  const bytes = Buffer.from([1, 2, 3]);
  assert.deepEqual(rep.value.serialize(bytes), bytes);
  assert.deepEqual(sink(app, 'out').value.serialize(bytes), bytes);
});

test('keyBy without a key serde should refuse a non-string key instead of writing String(key)', () => {
  const app = new App({ id: 'rekey' });
  app
    .stream('in', { value: json<{ bucket: number }>() })
    // The types refuse this too (test/types/api.ts); a JavaScript job meets the runtime check.
    .keyBy(((v: { bucket: number }) => v.bucket) as unknown as (v: { bucket: number }) => string, {
      name: 'by-bucket',
    })
    .to('out');
  const key = sink(app, 'rekey-by-bucket-repartition').key;
  assert.equal(key.serialize('7')!.toString(), '7');
  assert.equal(key.serialize(null), null);
  assert.throws(
    () => key.serialize(7 as unknown as string),
    (e: unknown) =>
      e instanceof SerdeError && /keyBy returned a number key \(7\).*\{ key: number\(\) \}/.test(e.message),
  );
});

test('keyBy with a number key serde should read the key back as a number', () => {
  const app = new App({ id: 'rekey-n' });
  app
    .stream('in', { value: json<{ bucket: number }>() })
    .keyBy((v) => v.bucket, { key: number(), name: 'by-bucket' })
    .to('out');
  const rep = sink(app, 'rekey-n-by-bucket-repartition');
  const source = app.graph.nodes.find(
    (n: GraphNode) => n.spec.kind === 'source' && n.spec.topics[0] === 'rekey-n-by-bucket-repartition',
  )!;
  assert.ok(source.spec.kind === 'source');
  const back = source.spec.key.deserialize(rep.key.serialize(7));
  assert.equal(back, 7);
  assert.equal(back + 1, 8);
  assert.equal(sink(app, 'out').key.serialize(7)!.toString(), '7');
});

test('late records of a window over a bytes stream should go to the side topic as their bytes', () => {
  const app = new App({ id: 'late-bytes' });
  app.stream('in').byKey().window(tumbling(1000)).late('late-out').count({ name: 'n' }).to('out');
  const late = app.graph.nodes.find((n: GraphNode) => n.spec.kind === 'late')!;
  assert.ok(late.spec.kind === 'late');
  const bytes = Buffer.from([9, 8, 7]);
  assert.deepEqual(late.spec.value.serialize(bytes), bytes);
});
