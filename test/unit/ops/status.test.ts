import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SluiceConfig } from '../../../src/config/schema.js';
import { App, json } from '../../../src/index.js';
import type { GroupView } from '../../../src/ops/group-view.js';
import { buildStatus, type StatusSection, type StatusSource, topologyJson } from '../../../src/ops/status.js';
import { advertisedUrl } from '../../../src/runtime/start.js';

function source(sections: Map<string, StatusSection>): StatusSource {
  const app = new App({ id: 's' });
  app
    .stream('in', { value: json<{ k: string }>() })
    .keyBy((r) => r.k, { name: 'by-k' })
    .count({ name: 'n' })
    .to('out');
  const topology = app.topology();
  const counts = new Float64Array(10);
  counts[0] = 7;
  return {
    app,
    config: { processing: { guarantee: 'exactly_once' } } as SluiceConfig,
    topology,
    state: 'running',
    tasks: new Map(),
    lag: new Map(),
    plan: new Map([
      [0, 2],
      [1, 2],
    ]),
    memberId: 'm-1',
    groupInstanceId: 'pod-1',
    clientId: 'c-1',
    httpAddress: 'http://h:1',
    group: {
      current: {
        state: 'Stable',
        at: 1,
        owners: new Map(),
        members: [{ memberId: 'm-1', clientId: 'c-1', host: 'h', http: 'http://h:1', tasks: [] }],
      },
    } as unknown as GroupView,
    opCounts: counts,
    statusSections: sections,
    readiness: () => ({ ready: true }),
  };
}

test('buildStatus should describe the worker, the group, the operators and the plugged-in sections', () => {
  const sections = new Map<string, StatusSection>([
    ['overload', () => ({ shedFraction: 0.25, recommendedWorkers: 3 })],
    [
      'broken',
      () => {
        throw new Error('nope');
      },
    ],
  ]);
  const s = buildStatus(source(sections)) as any;
  assert.equal(s.app, 's');
  assert.deepEqual(s.worker, {
    memberId: 'm-1',
    groupInstanceId: 'pod-1',
    clientId: 'c-1',
    http: 'http://h:1',
  });
  assert.equal(s.group.members[0].self, true);
  assert.deepEqual(s.partitions, { 0: 2, 1: 2 });
  assert.deepEqual(s.operators[0], { id: 0, name: 'source-0', kind: 'source', subtopology: 0, records: 7 });
  assert.deepEqual(s.overload, { shedFraction: 0.25, recommendedWorkers: 3 });
  assert.deepEqual(s.broken, { error: 'nope' }, 'a failing section does not break /status');
});

test('topologyJson should give every operator with its children, topics and stores', () => {
  const t = topologyJson(source(new Map()).topology) as any;
  const byName = new Map(t.nodes.map((n: any) => [n.name, n]));
  assert.deepEqual((byName.get('by-k-sink') as any).topics, ['s-by-k-repartition']);
  assert.equal((byName.get('by-k-sink') as any).internal, true);
  assert.deepEqual((byName.get('n') as any).stores, ['n-agg']);
  assert.deepEqual(t.repartitionTopics, ['s-by-k-repartition']);
});

test('advertisedUrl should prefer http.advertisedUrl and never advertise a wildcard host', () => {
  assert.equal(
    advertisedUrl({ host: '0.0.0.0', advertisedUrl: 'http://w-1.svc:9464/' }, 1),
    'http://w-1.svc:9464',
  );
  assert.equal(advertisedUrl({ host: '127.0.0.1' }, 9464), 'http://127.0.0.1:9464');
  assert.doesNotMatch(advertisedUrl({ host: '0.0.0.0' }, 9464), /0\.0\.0\.0/);
  assert.equal(advertisedUrl({ host: '::1' }, 80), 'http://[::1]:80');
});
