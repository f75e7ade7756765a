import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Collector } from '../../../src/runtime/collector.js';

test("outputs keep their timestamp as a number, and time 0 as '0' (kafkajs sends a numeric 0 as now)", () => {
  const c = new Collector();
  c.emit('out', null, Buffer.from('a'), 1_764_633_000_123, undefined);
  c.emit('out', null, Buffer.from('b'), 0, undefined);
  c.emit('out', null, Buffer.from('c'), -5, undefined);
  const out = c.drain().get('out')!;
  assert.deepEqual(
    out.map((r) => r.timestamp),
    [1_764_633_000_123, '0', -5],
  );
});
