import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { InRecord } from '../../../src/kafka/types.js';
import { sumApp } from '../../helpers/sum-app.js';
import { taskHarness } from '../../helpers/task-harness.js';

/**
 * Issue 14: a text key is not serialized again on its way through. The bytes read are its
 * serialization, so a keyed operator's state key and a sink's record key are those bytes — except
 * after a byte order mark, which the string serde drops when it reads the key.
 */
/** The same memory, not equal contents (small Buffers share a pool). */
const sameBytes = (x: Buffer, y: Buffer) => x.buffer === y.buffer && x.byteOffset === y.byteOffset;

test('a text key read from Kafka should reach the state and the sink as the bytes read, unless they start with a BOM', async () => {
  const h = await taskHarness(sumApp('unit-key-bytes'));
  const a = h.rec('user-1', { n: 1 }, 1);
  const bom: InRecord = { ...h.rec('x', { n: 2 }, 1), key: Buffer.from([0xef, 0xbb, 0xbf, 0x75]) };
  const again = h.rec('user-1', { n: 3 }, 1);
  h.task.process('in', [a, bom, again], () => undefined);
  const out = (await h.checkpoint()).get('out')!;
  assert.equal(out.length, 3);
  assert.equal(out[0]!.key!.toString(), 'user-1');
  assert.ok(sameBytes(out[0]!.key!, a.key!), 'the sink wrote the bytes read, not a new serialization');
  assert.deepEqual([...out[1]!.key!], [0x75], 'the BOM is gone from the key, as the serde read it');
  assert.ok(sameBytes(out[2]!.key!, again.key!));
  assert.deepEqual(
    h.values(new Map([['out', out]]), 'out').map((v) => v.sum),
    [1, 2, 4],
    'the state is keyed as before: user-1 sums 1 and 3',
  );
});
