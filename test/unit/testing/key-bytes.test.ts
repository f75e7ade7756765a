import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, bytes, json, number, string, valueState } from '../../../src/index.js';
import { TestDriver } from '../../../src/testing/index.js';

/**
 * A sink after `process` takes the key bytes the state used when its key serde writes the same
 * format (record-context.ts, keyMemo); any other serde, or a key changed on the way, is
 * serialized by the sink itself. The bytes in the output topic say which.
 */
const counter = { acc: valueState<number>() };

function app(
  id: string,
  keySerde: 'string' | 'json' | 'number',
  sinkKey: 'string' | 'json' | 'number',
  rekey: boolean,
): App {
  const serde = { string: string(), json: json<unknown>(), number: number() };
  const a = new App({ id });
  const s = a
    .keyedStream('in', { key: serde[keySerde] as any, value: json<number>() })
    .process<number, typeof counter>({
      state: counter,
      onRecord(v, ctx) {
        const n = (ctx.state.acc.get() ?? 0) + v;
        ctx.state.acc.set(n);
        ctx.emit(n);
      },
    });
  const out = rekey
    ? s.keyBy((n): unknown => (sinkKey === 'number' ? n : `k${n}`), { key: serde[sinkKey] as any })
    : s;
  out.to('out', { key: serde[sinkKey] as any, value: json<number>() });
  return a;
}

async function rawKeys(a: App, keys: unknown[]): Promise<string[]> {
  const d = new TestDriver(a);
  try {
    const input = d.input('in');
    for (const k of keys) await input.pipe(k, 1);
    return d
      .output('out', { key: bytes() })
      .readAll()
      .map((r) => (r.key as Buffer).toString('utf8'));
  } finally {
    await d.close();
  }
}

test("a sink after process should write its own serde's key bytes, whatever the state used", async () => {
  assert.deepEqual(await rawKeys(app('kb-same', 'string', 'string', false), ['a', 'é', 'a']), [
    'a',
    'é',
    'a',
  ]);
  // State keyed by JSON text ("a" with quotes), output keyed by plain text.
  assert.deepEqual(await rawKeys(app('kb-json-string', 'json', 'string', false), ['a', 'b']), ['a', 'b']);
  assert.deepEqual(await rawKeys(app('kb-string-json', 'string', 'json', false), ['a', 'b']), ['"a"', '"b"']);
  assert.deepEqual(await rawKeys(app('kb-num-json', 'number', 'json', false), [7, 7]), ['7', '7']);
  // The key changed after the state: the sink serializes the new one.
  assert.deepEqual(await rawKeys(app('kb-rekey', 'string', 'string', true), ['a', 'a']), ['k1', 'k2']);
  assert.deepEqual(await rawKeys(app('kb-rekey-num', 'number', 'number', true), [5, 5]), ['1', '2']);
});
