import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../../src/config/load.js';
import { configLeaves } from '../../../src/config/schema.js';
import { App, json } from '../../../src/index.js';
import { validateOverload } from '../../../src/overload/validate.js';

test('overload config should default to backpressure with H = 0.9 and be settable from env', () => {
  const c = loadConfig({ env: {} });
  assert.equal(c.overload.mode, 'backpressure');
  assert.equal(c.overload.headroom, 0.9);
  const d = loadConfig({
    env: {
      SLUICE_OVERLOAD_MODE: 'divert',
      SLUICE_OVERLOAD_HEADROOM: '0.5',
      SLUICE_OVERLOAD_LATENCY_TARGET_MS: '2000',
    },
  });
  assert.equal(d.overload.mode, 'divert');
  assert.equal(d.overload.headroom, 0.5);
  assert.equal(d.overload.latencyTargetMs, 2000);
  assert.ok(configLeaves.some((l) => l.path.join('.') === 'overload.placement'));
});

test('overload config should reject a headroom outside (0, 1] and priority drops at the source', () => {
  assert.throws(() => loadConfig({ env: { SLUICE_OVERLOAD_HEADROOM: '0' } }), /overload\.headroom/);
  assert.throws(() => loadConfig({ env: { SLUICE_OVERLOAD_HEADROOM: '1.2' } }), /overload\.headroom/);
  assert.throws(() => loadConfig({ env: { SLUICE_OVERLOAD_MODE: 'drop' } }), /overload\.mode/);
  assert.throws(
    () => loadConfig({ env: { SLUICE_OVERLOAD_DROP: 'priority' } }),
    /overload\.drop.*placement 'operator'/s,
  );
  const ok = loadConfig({ env: { SLUICE_OVERLOAD_DROP: 'priority', SLUICE_OVERLOAD_PLACEMENT: 'operator' } });
  assert.equal(ok.overload.drop, 'priority');
});

test('validateOverload should refuse operator placement without .shed() points and priority drops without a priority', () => {
  const base = loadConfig({ env: {} }).overload;
  const plain = new App({ id: 'v1' });
  plain
    .stream('in', { value: json<number>() })
    .map((v) => v + 1)
    .to('out');
  assert.throws(
    () => validateOverload(plain.topology(), { ...base, mode: 'shed', placement: 'operator' }),
    /no \.shed\(\) point/,
  );
  validateOverload(plain.topology(), { ...base, mode: 'backpressure', placement: 'operator' });
  validateOverload(plain.topology(), { ...base, mode: 'shed', placement: 'source' });
  const noPrio = new App({ id: 'v2' });
  noPrio.stream('in', { value: json<number>() }).shed({ name: 'drop-here' }).to('out');
  const prioCfg = {
    ...base,
    mode: 'divert' as const,
    placement: 'operator' as const,
    drop: 'priority' as const,
  };
  assert.throws(() => validateOverload(noPrio.topology(), prioCfg), /drop-here have no priority/);
  const withPrio = new App({ id: 'v3' });
  withPrio
    .stream('in', { value: json<number>() })
    .shed({ priority: (v) => v })
    .to('out');
  validateOverload(withPrio.topology(), prioCfg);
});
