import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { METRIC } from '../../src/ops/metrics.js';

// Compiled to dist/test/unit/, so the repository root is three folders up.
const root = new URL('../../../', import.meta.url);
const dashboard = JSON.parse(readFileSync(new URL('grafana/dashboards/sluice.json', root), 'utf8'));
const panels: any[] = dashboard.panels.flatMap((p: any) => [p, ...(p.panels ?? [])]);
const queryPanels = panels.filter((p) => p.type !== 'row');

/** Defined by other work in progress (overload, windows); the Prometheus test skips their panels. */
const PENDING = [
  'sluice_shed_fraction',
  'sluice_records_shed_total',
  'sluice_arrival_rate',
  'sluice_capacity',
  'sluice_recommended_workers',
  'sluice_late_records_total',
];

test('Grafana dashboard should query only metrics that METRIC, Node defaults or pending work define', () => {
  const known = new Set<string>([...Object.values(METRIC).map((m) => m.name), ...PENDING]);
  const unknown: string[] = [];
  for (const p of queryPanels) {
    for (const t of p.targets) {
      for (const [name] of t.expr.matchAll(/\bsluice_[a-z0-9_]+\b/g)) {
        const base = name.replace(/_(bucket|sum|count)$/, '');
        if (!known.has(name) && !known.has(base) && !name.startsWith('sluice_node_'))
          unknown.push(`${p.title}: ${name}`);
      }
    }
  }
  assert.deepEqual(unknown, []);
});

test('Grafana dashboard should have the panels the issue asks for', () => {
  const titles = queryPanels.map((p) => p.title);
  for (const want of [
    'Throughput in per topic',
    'Throughput out per topic',
    'End-to-end latency p50 / p99',
    'Lag per partition',
    'Checkpoint duration p50 / p99',
    'Restore progress',
    'State size',
    'Cache hit rate',
    'Shed fraction p',
    'Shed rate',
    'Capacity vs arrival rate',
    'Recommended workers',
    'Rebalances and tasks',
    'Dead-letter rate',
    'Errors',
    'Late records',
  ])
    assert.ok(titles.includes(want), `no panel "${want}"`);
});

test('Grafana dashboard should be well-formed: unique ids, grid inside 24 columns, known variables', () => {
  const ids = panels.map((p) => p.id);
  assert.equal(new Set(ids).size, ids.length, 'panel ids are unique');
  for (const p of panels) {
    const g = p.gridPos;
    assert.ok(g.x >= 0 && g.w > 0 && g.x + g.w <= 24, `${p.title}: grid ${JSON.stringify(g)}`);
  }
  const vars = new Set(dashboard.templating.list.map((v: any) => v.name));
  for (const p of queryPanels) {
    assert.ok(p.targets.length > 0, `${p.title}: no queries`);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a JS template
    assert.equal(p.datasource.uid, '${datasource}', `${p.title}: uses the data source variable`);
    const refIds = p.targets.map((t: any) => t.refId);
    assert.equal(new Set(refIds).size, refIds.length, `${p.title}: unique refIds`);
    for (const t of p.targets) {
      for (const [, v] of t.expr.matchAll(/\$(\w+)/g))
        assert.ok(v.startsWith('__') || vars.has(v), `${p.title}: unknown variable $${v}`);
      assert.ok(!/\{[^}]*\bkey=/.test(t.expr), `${p.title}: no per-key selectors`);
    }
  }
});

test('Grafana provisioning should point the data source variable at the provisioned Prometheus', () => {
  const ds = parseYaml(
    readFileSync(new URL('grafana/provisioning/datasources/prometheus.yml', root), 'utf8'),
  );
  const dsVar = dashboard.templating.list.find((v: any) => v.type === 'datasource');
  assert.equal(dsVar.query, 'prometheus');
  assert.equal(ds.datasources[0].type, 'prometheus');
  assert.equal(ds.datasources[0].uid, dsVar.current.value);
});
