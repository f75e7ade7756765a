import assert from 'node:assert/strict';
import { test } from 'node:test';
import { logLevel } from 'kafkajs';
import { pino } from 'pino';
import { isRetriedAnswer, kafkaLogCreator } from '../../../src/kafka/log-bridge.js';

test('isRetriedAnswer should recognise leadership and CONCURRENT_TRANSACTIONS answers and nothing else', () => {
  assert.ok(
    isRetriedAnswer('Response Produce(key: 0, version: 7)', {
      error: 'This server is not the leader for that topic-partition',
    }),
  );
  assert.ok(
    isRetriedAnswer('Response Metadata(key: 3, version: 6)', {
      error: 'There is no leader for this topic-partition as we are in the middle of a leadership election',
    }),
  );
  assert.ok(
    !isRetriedAnswer('Response Fetch(key: 1, version: 11)', {
      error: "The coordinator is loading and hence can't process requests",
    }),
  );
  assert.ok(
    isRetriedAnswer('Response AddPartitionsToTxn(key: 24, version: 1)', {
      error:
        'The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing',
    }),
  );
  assert.ok(!isRetriedAnswer('Connection error: connect ECONNREFUSED 127.0.0.1:9092', {}));
});

test('kafkaLogCreator should log leadership noise at debug and other kafkajs errors at warn', () => {
  const lines: Array<{ level: number; msg: string }> = [];
  const logger = pino({ level: 'debug' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  const log = kafkaLogCreator(logger)(logLevel.ERROR);
  const entry = (message: string, error?: string) => ({
    namespace: 'Connection',
    level: logLevel.ERROR,
    label: 'ERROR',
    log: { timestamp: '', logger: 'kafkajs', message, ...(error ? { error } : {}) },
  });
  log(
    entry('Response Produce(key: 0, version: 7)', 'This server is not the leader for that topic-partition'),
  );
  log(entry('Connection error: connect ECONNREFUSED 127.0.0.1:9092'));
  assert.deepEqual(
    lines.map((l) => [l.level, l.msg]),
    [
      [20, 'Response Produce(key: 0, version: 7)'],
      [40, 'Connection error: connect ECONNREFUSED 127.0.0.1:9092'],
    ],
  );
});
