import assert from 'node:assert/strict';
import { test } from 'node:test';
import { renderServerProperties } from '../../../src/dev/kafka-config.js';

const base = { flavour: 'log4j2' as const, port: 9092, controllerPort: 9093, kraftDir: '/d/kraft' };

test('server.properties should stay PLAINTEXT-only without security options', () => {
  const p = renderServerProperties(base);
  assert.match(p, /^listeners=PLAINTEXT:\/\/127\.0\.0\.1:9092,CONTROLLER:\/\/127\.0\.0\.1:9093$/m);
  assert.match(p, /^listener\.security\.protocol\.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT$/m);
  assert.doesNotMatch(p, /sasl|ssl\./);
});

test('server.properties should add SASL_PLAINTEXT and SSL listeners with their settings', () => {
  const p = renderServerProperties({
    ...base,
    security: {
      sasl: { port: 9094, users: [{ username: 'alice', password: 'pw-1' }] },
      ssl: { port: 9095, keystore: '/c/broker.p12', keystorePassword: 'ks-pw', clientCa: '/c/ca.pem' },
    },
  });
  assert.match(
    p,
    /^listeners=PLAINTEXT:\/\/127\.0\.0\.1:9092,CONTROLLER:\/\/127\.0\.0\.1:9093,SASL_PLAINTEXT:\/\/127\.0\.0\.1:9094,SSL:\/\/127\.0\.0\.1:9095$/m,
  );
  assert.match(
    p,
    /^advertised\.listeners=PLAINTEXT:\/\/127\.0\.0\.1:9092,SASL_PLAINTEXT:\/\/127\.0\.0\.1:9094,SSL:\/\/127\.0\.0\.1:9095$/m,
  );
  assert.match(
    p,
    /^listener\.security\.protocol\.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL$/m,
  );
  assert.match(p, /^inter\.broker\.listener\.name=PLAINTEXT$/m);
  assert.match(p, /^sasl\.enabled\.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512$/m);
  assert.match(p, /PlainLoginModule required user_alice="pw-1";$/m);
  assert.match(
    p,
    /^listener\.name\.sasl_plaintext\.scram-sha-512\.sasl\.jaas\.config=.*ScramLoginModule required;$/m,
  );
  assert.match(p, /^listener\.name\.ssl\.ssl\.keystore\.location=\/c\/broker\.p12$/m);
  assert.match(p, /^listener\.name\.ssl\.ssl\.client\.auth=required$/m);
  assert.match(p, /^listener\.name\.ssl\.ssl\.truststore\.type=PEM$/m);
});
