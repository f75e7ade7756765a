import { randomUUID } from 'node:crypto';
import type { SluiceConfig } from '../config/schema.js';
import type { KafkaClient } from '../kafka/client.js';
import type { GroupConsumer } from '../kafka/consumer.js';
import { WORKER_TRANSACTION_TIMEOUT_MS } from '../kafka/producer.js';
import type { Logger } from '../ops/logger.js';
import { transactionObserver, type WorkerMetrics } from '../ops/metrics.js';
import { WorkerTransactions } from './worker-transactions.js';

/**
 * The worker's transactions under exactly-once v2 (`processing.transactions: worker`), else
 * undefined. The transactional id is `<appId>-<group.instance.id>`, so a restarted worker's
 * producer aborts what its previous run left open; a dynamic member gets a fresh one per run.
 * Each committed transaction's phases go to `sluice_transaction_phase_seconds`.
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
  const app = w.appId;
  const observe = transactionObserver(w.metrics, app);
  return new WorkerTransactions({
    transactionalId: `${app}-${groupInstanceId ?? randomUUID()}`,
    groupId: app,
    make: async (id) => {
      const p = await w.client.transactionalProducer(id, WORKER_TRANSACTION_TIMEOUT_MS);
      p.onCommitted = observe;
      return p;
    },
    groupMetadata: () => consumer()?.groupMetadata(),
    admin: () => w.client.admin(),
    logger: w.logger,
    counted: (ok, queued) => {
      (ok ? w.metrics.txCommits : w.metrics.txAborts).inc({ app });
      if (queued !== undefined) w.metrics.transactionPhase.observe({ app, phase: 'queued' }, queued);
    },
  });
}
