import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { renderServerProperties, replicationFor } from '../../../src/dev/kafka-config.js';
import { startLocalKafka, stopLocalKafka } from '../../../src/dev/local-kafka.js';
import { SluiceError } from '../../../src/errors.js';

function properties(text: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    map.set(line.slice(0, eq), line.slice(eq + 1));
  }
  return map;
}

const node2 = (flavour: 'log4j2' | 'reload4j' = 'log4j2') =>
  properties(
    renderServerProperties({
      flavour,
      port: 29102,
      controllerPort: 29103,
      kraftDir: '/d/node-2/kraft',
      cluster: { nodeId: 2, controllerPorts: [29101, 29103, 29105] },
    }),
  );

test('a node of a 3-node cluster should vote in a static quorum of all three and listen on its own ports', () => {
  const p = node2();
  assert.equal(p.get('process.roles'), 'broker,controller');
  assert.equal(p.get('node.id'), '2');
  assert.equal(p.get('controller.quorum.voters'), '1@127.0.0.1:29101,2@127.0.0.1:29103,3@127.0.0.1:29105');
  assert.equal(p.get('listeners'), 'PLAINTEXT://127.0.0.1:29102,CONTROLLER://127.0.0.1:29103');
  assert.equal(p.get('advertised.listeners'), 'PLAINTEXT://127.0.0.1:29102');
  assert.equal(p.get('log.dirs'), '/d/node-2/kraft');
});

test('a 3-node cluster should replicate new topics, offsets and the transaction log 3 times with min ISR 2', () => {
  const p = node2();
  assert.equal(p.get('default.replication.factor'), '3');
  assert.equal(p.get('min.insync.replicas'), '2');
  assert.equal(p.get('offsets.topic.replication.factor'), '3');
  assert.equal(p.get('transaction.state.log.replication.factor'), '3');
  assert.equal(p.get('transaction.state.log.min.isr'), '2');
  assert.equal(p.get('share.coordinator.state.topic.replication.factor'), '3');
  assert.equal(p.get('share.coordinator.state.topic.min.isr'), '2');
  const old = node2('reload4j');
  assert.equal(old.get('transaction.state.log.min.isr'), '2');
  assert.equal([...old.keys()].filter((k) => k.startsWith('share.')).length, 0);
});

test('replication should be min(3, nodes) copies, min ISR 2 only from 3 copies on', () => {
  assert.deepEqual(replicationFor(1), { factor: 1, minIsr: 1 });
  assert.deepEqual(replicationFor(2), { factor: 2, minIsr: 1 });
  assert.deepEqual(replicationFor(3), { factor: 3, minIsr: 2 });
  assert.deepEqual(replicationFor(5), { factor: 3, minIsr: 2 });
  const single = properties(
    renderServerProperties({ flavour: 'log4j2', port: 1, controllerPort: 2, kraftDir: '/k' }),
  );
  assert.equal(single.get('default.replication.factor'), '1');
  assert.equal(single.get('min.insync.replicas'), '1');
});

test('an extra listener should bind its own port and advertise the proxy port in front of it', () => {
  const p = properties(
    renderServerProperties({
      flavour: 'log4j2',
      port: 29102,
      controllerPort: 29103,
      kraftDir: '/k',
      cluster: { nodeId: 2, controllerPorts: [29101, 29103, 29105] },
      listeners: [{ name: 'PROXIED', port: 29202, advertisedPort: 29302 }],
    }),
  );
  assert.equal(
    p.get('listeners'),
    'PLAINTEXT://127.0.0.1:29102,CONTROLLER://127.0.0.1:29103,PROXIED://127.0.0.1:29202',
  );
  assert.equal(p.get('advertised.listeners'), 'PLAINTEXT://127.0.0.1:29102,PROXIED://127.0.0.1:29302');
  assert.equal(
    p.get('listener.security.protocol.map'),
    'CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PROXIED:PLAINTEXT',
  );
  assert.equal(p.get('inter.broker.listener.name'), 'PLAINTEXT', 'brokers keep talking on PLAINTEXT');
});

test('startLocalKafka should refuse bad cluster options before resolving jars or starting anything', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'sluice-cluster-unit-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const env = { HOME: dataDir, XDG_CACHE_HOME: join(dataDir, 'cache') } as NodeJS.ProcessEnv;
  const refused = async (opts: Parameters<typeof startLocalKafka>[0], pattern: RegExp) =>
    assert.rejects(startLocalKafka({ port: 29100, dataDir, env, ...opts }), (e: unknown) => {
      assert.ok(e instanceof SluiceError, String(e));
      assert.equal(e.code, 'SLUICE_CONFIG_INVALID');
      assert.match(e.message, pattern);
      return true;
    });
  await refused({ brokers: 0 }, /brokers must be an integer from 1 to 9, got 0/);
  await refused({ brokers: 2.5 }, /brokers must be an integer/);
  await refused({ brokers: 10 }, /from 1 to 9/);
  await refused({ brokers: 3, controllerPort: 29200 }, /controllerPort is for a single broker/);
  await refused({ brokers: 3, port: 65531 }, /leaves no room for 3 brokers/);
  await refused(
    { brokers: 3, security: { sasl: { port: 29300, users: [{ username: 'u', password: 'p' }] } } },
    /security listeners are for a single broker/,
  );
  await refused(
    { brokers: 3, listeners: [{ name: 'PROXIED', ports: [29400, 29401] }] },
    /one port .* per broker \(3\)/,
  );
  await refused({ brokers: 3, listeners: [{ name: 'proxied', ports: [1, 2, 3] }] }, /upper-case/);
  await refused({ brokers: 3, listeners: [{ name: 'PLAINTEXT', ports: [1, 2, 3] }] }, /not PLAINTEXT/);
  await refused(
    { brokers: 3, listeners: [{ name: 'PROXIED', ports: [29400, 29401, 29101] }] },
    /port 29101 is already used/,
  );
  await refused({ listeners: [{ name: 'PROXIED', ports: [29400, 29401] }] }, /per broker \(1\)/);
  // A stop of one node needs a cluster in that data dir.
  await assert.rejects(stopLocalKafka({ port: 29100, dataDir, env, node: 2 }), /no cluster was started/);
});
