import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { json } from '../../../src/api/serdes.js';
import { SerdeError } from '../../../src/errors.js';
import { messageWithNewCauses, serializeError } from '../../../src/ops/logger.js';

/** The `err.message` of one log line written with createLogger's error serializer. */
function loggedMessage(err: Error): string {
  const lines: string[] = [];
  const logger = pino({ serializers: { err: serializeError } }, { write: (l: string) => void lines.push(l) });
  logger.warn({ err }, 'bad record');
  return JSON.parse(lines[0]!).err.message;
}

test('messageWithNewCauses should not repeat a cause whose message the error already holds', () => {
  let e: unknown;
  try {
    json().deserialize(Buffer.from('{nope'));
  } catch (x) {
    e = x;
  }
  assert.ok(e instanceof SerdeError);
  const once = messageWithNewCauses(e);
  assert.match(once, /^invalid JSON: /);
  const cause = (e.cause as Error).message;
  assert.equal(once.split(cause).length - 1, 1, `the cause's text once: ${once}`);
  assert.equal(loggedMessage(e), once);
});

test('messageWithNewCauses should add the causes that say something new, and survive cycles', () => {
  const root = new Error('ECONNREFUSED 127.0.0.1:9092');
  const mid = new Error('connection failed', { cause: root });
  const top = new Error('cannot start', { cause: mid });
  assert.equal(messageWithNewCauses(top), 'cannot start: connection failed: ECONNREFUSED 127.0.0.1:9092');
  const a = new Error('a') as Error & { cause?: unknown };
  const b = new Error('b', { cause: a });
  a.cause = b;
  assert.equal(messageWithNewCauses(a), 'a: b');
  assert.equal(messageWithNewCauses(new Error('x', { cause: 'a string cause' })), 'x: a string cause');
  assert.equal(messageWithNewCauses('not an error'), 'not an error');
});
