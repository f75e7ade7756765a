import assert from 'node:assert/strict';
import { test } from 'node:test';
import { userMessage, version } from '../../../src/cli/main.js';
import { formatTailed, lineToRecord } from '../../../src/cli/records-command.js';
import { topologyDot, topologyJson } from '../../../src/cli/topology-format.js';
import { UsageError } from '../../../src/cli/usage.js';
import { ConfigError } from '../../../src/errors.js';
import { App, json, number, string, valueState } from '../../../src/index.js';

test('lineToRecord should split at the first separator, and give no key without one', () => {
  const text = (b: Buffer | null) => (b === null ? null : b.toString('utf8'));
  const r = (line: string, sep?: string) => {
    const x = lineToRecord(line, sep);
    return [text(x.key), text(x.value)];
  };
  assert.deepEqual(r('u1:hello:world', ':'), ['u1', 'hello:world']);
  assert.deepEqual(r('u1::x', '::'), ['u1', 'x']);
  assert.deepEqual(r('no separator', ':'), [null, 'no separator']);
  assert.deepEqual(r(':v', ':'), ['', 'v']);
  assert.deepEqual(r('a:b'), [null, 'a:b']);
  assert.deepEqual(r('héllo', ''), [null, 'héllo']);
});

test('formatTailed should print partition, offset, key and value, tab-separated or as JSON', () => {
  const rec = {
    topic: 't',
    partition: 2,
    offset: '41',
    timestamp: '1700000000000',
    key: Buffer.from('k'),
    value: Buffer.from('a\tb\nc'),
  };
  assert.equal(formatTailed(rec, 'text'), '2\t41\tk\ta b c');
  assert.equal(formatTailed({ ...rec, key: null, value: null }, 'text'), '2\t41\tnull\tnull');
  assert.deepEqual(JSON.parse(formatTailed({ ...rec, key: null }, 'json')), {
    partition: 2,
    offset: '41',
    timestamp: 1700000000000,
    key: null,
    value: 'a\tb\nc',
  });
});

function job(): App {
  const app = new App({ id: 'fmt' });
  app
    .stream('orders', { value: json<{ user: string; n: number }>() })
    .keyBy((o) => o.user, { name: 'by-user' })
    .process(
      {
        state: { total: valueState<number>() },
        onRecord(o, ctx) {
          const t = (ctx.state.total.get() ?? 0) + o.n;
          ctx.state.total.set(t);
          ctx.emit(t);
        },
      },
      { name: 'sum' },
    )
    .to('totals', { key: string(), value: number() });
  return app;
}

test('topologyJson should list sub-topologies with operators, topics and stores', () => {
  const doc = topologyJson(job().topology()) as any;
  assert.equal(doc.appId, 'fmt');
  assert.equal(doc.subtopologies.length, 2);
  assert.deepEqual(doc.subtopologies[0].sourceTopics, ['orders']);
  assert.deepEqual(doc.subtopologies[0].sinkTopics, ['fmt-by-user-repartition']);
  const sum = doc.subtopologies[1].nodes.find((n: any) => n.name === 'sum');
  assert.equal(sum.kind, 'process');
  assert.deepEqual(doc.subtopologies[1].stores, ['sum-total']);
  assert.deepEqual(
    doc.repartitionTopics.map((r: any) => [r.topic, r.writtenBy]),
    [['fmt-by-user-repartition', 0]],
  );
  assert.deepEqual(doc.stores, [{ name: 'sum-total', changelog: 'fmt-sum-total-changelog', subtopology: 1 }]);
  assert.doesNotThrow(() => JSON.stringify(doc));
});

test('topologyDot should draw clusters, topic edges and stores as a Graphviz digraph', () => {
  const dot = topologyDot(job().topology());
  assert.match(dot, /^digraph "fmt" \{\n/);
  assert.match(dot, /\}\n$/);
  assert.match(dot, /subgraph "cluster_0" \{/);
  assert.match(dot, /subgraph "cluster_1" \{/);
  assert.match(dot, /"topic:orders" -> "source-0";/);
  assert.match(dot, /"by-user-sink" -> "topic:fmt-by-user-repartition";/);
  assert.match(
    dot,
    /"topic:fmt-by-user-repartition" \[shape=ellipse, label="fmt-by-user-repartition", style=dashed\];/,
  );
  assert.match(dot, /"store:sum-total" \[shape=cylinder/);
  assert.match(dot, /"sum" -> "store:sum-total"/);
  // Every quoted id is balanced: an even number of unescaped quotes per line.
  for (const line of dot.split('\n')) assert.equal((line.match(/(?<!\\)"/g) ?? []).length % 2, 0, line);
});

test('userMessage should phrase usage, config and busy-port errors and leave others to the stack trace', () => {
  assert.match(
    userMessage(new UsageError('run needs a job file', 'run'))!,
    /^run needs a job file\n\nUsage: sluice run/,
  );
  assert.equal(userMessage(new UsageError('topic "x" does not exist')), 'topic "x" does not exist\n');
  assert.match(userMessage(new ConfigError([{ path: 'a', message: 'b' }]))!, /a: b/);
  const busy = Object.assign(new Error('listen EADDRINUSE: address already in use 0.0.0.0:9464'), {
    code: 'EADDRINUSE',
    syscall: 'listen',
    address: '0.0.0.0',
    port: 9464,
  });
  assert.match(userMessage(busy)!, /^the HTTP port 0\.0\.0\.0:9464 is in use .*--http-port N/);
  assert.match(userMessage(new Error('wrapped', { cause: busy }))!, /HTTP port 0\.0\.0\.0:9464 is in use/);
  assert.equal(userMessage(new Error('a bug')), undefined);
});

test('version should be the package version', () => {
  assert.match(version(), /^\d+\.\d+\.\d+/);
});
