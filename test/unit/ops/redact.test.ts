import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import { REDACT_PATHS, REDACTED, scrubber, secretsOf } from '../../../src/ops/redact.js';

function capture(secrets: string[]) {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const logger = pino(
    {
      level: 'trace',
      redact: { paths: [...REDACT_PATHS], censor: REDACTED },
      hooks: { streamWrite: scrubber(secrets) },
    },
    sink,
  );
  return { logger, lines };
}

test('redaction should blank the secret fields of a config and of kafkajs options', () => {
  const { logger, lines } = capture([]);
  logger.info({
    config: {
      kafka: { sasl: { mechanism: 'plain', username: 'u', password: 'pw-1' }, ssl: { key: 'KEY' } },
      http: { authToken: 'tok-1' },
    },
    sasl: { password: 'pw-2' },
    ssl: { key: Buffer.from('KEY2'), cert: 'CERT' },
    req: { headers: { authorization: 'Bearer tok-2' } },
  });
  const text = lines.join('');
  for (const s of ['pw-1', 'pw-2', 'tok-1', 'tok-2', 'KEY"', 'KEY2'])
    assert.ok(!text.includes(s), `${s} leaked: ${text}`);
  assert.ok(text.includes('"username":"u"'), 'other fields stay');
  assert.ok(text.includes('CERT'), 'certificates are not secret');
});

test('redaction should remove secret values from messages, errors, stacks and child loggers', () => {
  const secret = 'S3cr"et\\with\nodd-chars';
  const { logger, lines } = capture([secret, 'plain-secret-0123456789']);
  logger.warn(`login as x with ${secret}`);
  logger
    .child({ component: 'kafkajs' })
    .error({ err: new Error(`broker said plain-secret-0123456789`) }, 'failed');
  logger.info({ nested: { deep: [`${secret}`] } });
  const text = lines.join('');
  assert.equal(lines.length, 3);
  assert.ok(!text.includes('plain-secret-0123456789'));
  assert.ok(!text.includes(JSON.stringify(secret).slice(1, -1)));
  assert.equal(text.split(REDACTED).length - 1, 4, text); // message, err.message, err.stack, nested value
});

test('secretsOf should list the SASL password and the HTTP token, and nothing when unset', () => {
  assert.deepEqual(secretsOf({ kafka: { sasl: { password: 'p' } }, http: { authToken: 't' } }), ['p', 't']);
  assert.deepEqual(secretsOf({ kafka: { sasl: {} }, http: {} }), []);
});

test('redaction should blank the Schema Registry password and token, by path and by value', () => {
  const cfg = {
    schemaRegistry: { url: 'http://r', auth: { username: 'key', password: 'sr-pw', bearerToken: 'sr-tok' } },
  };
  assert.deepEqual(secretsOf(cfg), ['sr-pw', 'sr-tok']);
  assert.deepEqual(secretsOf({ schemaRegistry: { url: 'https://key:in-url-secret@r:8081' } }), [
    'in-url-secret',
  ]);
  const byPath = capture([]);
  byPath.logger.info(cfg);
  const text = byPath.lines.join('');
  for (const s of ['sr-pw', 'sr-tok']) assert.ok(!text.includes(s), `${s} leaked: ${text}`);
  assert.ok(text.includes('"username":"key"'), 'other fields stay');
  const byValue = capture(secretsOf(cfg));
  byValue.logger.error({ err: new Error('registry refused sr-tok') }, 'failed');
  // A config logged inside another object: four levels down, the scrubber's job.
  byValue.logger.info({ config: cfg });
  for (const s of ['sr-pw', 'sr-tok']) assert.ok(!byValue.lines.join('').includes(s), `${s} leaked`);
});
