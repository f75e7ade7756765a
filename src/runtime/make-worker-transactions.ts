import { randomUUID } from 'node:crypto';
import type { SluiceConfig } from '../config/schema.js';
import type { KafkaClient } from '../kafka/client.js';
import type { GroupConsumer } from '../kafka/consumer.js';
import { WORKER_TRANSACTION_TIMEOUT_MS } from '../kafka/producer.js';
import type { Logger } from '../ops/logger.js';
import type { WorkerMetrics } from '../ops/metrics.js';
import { WorkerTransactions } from './worker-transactions.js';

/**
 * The worker's transactions under exactly-once v2 (`processing.transactions: worker`), else
 * undefined. The transactional id is `<appId>-<group.instance.id>`, so a restarted worker's
 * producer aborts what its previous run left open; a dynamic member gets a fresh one per run.
 */
export function workerTransactions(
  w: {
    appId: string;
    config: Readonly<SluiceConfig>;
    client: KafkaClient;
    logger: Logger;
    metrics: WorkerMetrics;
  },
  groupInstanceId: string | undefined,
  consumer: () => GroupConsumer | undefined,
): WorkerTransactions | undefined {
  const { processing } = w.config;
  if (processing.guarantee !== 'exactly_once' || processing.transactions !== 'worker') return undefined;
  return new WorkerTransactions({
    transactionalId: `${w.appId}-${groupInstanceId ?? randomUUID()}`,
    groupId: w.appId,
    make: (id) => w.client.transactionalProducer(id, WORKER_TRANSACTION_TIMEOUT_MS),
    groupMetadata: () => consumer()?.groupMetadata(),
    admin: () => w.client.admin(),
    logger: w.logger,
    counted: (ok) => (ok ? w.metrics.txCommits : w.metrics.txAborts).inc({ app: w.appId }),
    sentAhead: (records) => {
      let n = 0;
      for (const l of records.values()) n += l.length;
      w.metrics.sentAhead.inc({ app: w.appId }, n);
    },
  });
}
