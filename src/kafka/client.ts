// First, before kafkajs loads: the load-time changes to it (a side-effect import, never reordered).
import './kafkajs-preload.js';
import { type Admin, Kafka, type Producer } from 'kafkajs';
import type { Logger } from '../ops/logger.js';
import { KafkaAdmin } from './admin.js';
import { GroupConsumer, type GroupConsumerOptions } from './consumer.js';
import { assertKafkajsPatched } from './kafkajs-preload.js';
import { kafkaLogCreator, kafkaLogLevelFor } from './log-bridge.js';
import { PartitionReader } from './partition-reader.js';
import { createKeyPartitioner } from './partitioner.js';
import { PlainProducer, TRANSACTION_TIMEOUT_MS, TransactionalProducer } from './producer.js';
import { asAuthError, securityOptions, tlsPreflight } from './security.js';
import type { KafkaSettings } from './types.js';

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

/**
 * One kafkajs client per worker: it holds the broker list and the cluster metadata. Each producer
 * and consumer made from it opens its own connections (a kafkajs fact), so make them sparingly.
 */
export class KafkaClient {
  readonly kafka: Kafka;
  readonly logger: Logger;
  readonly settings: KafkaSettings;
  #admin: Promise<KafkaAdmin> | undefined;
  readonly #ssl: ReturnType<typeof securityOptions>['ssl'];
  /**
   * The `max.message.bytes` of the topics a worker writes, as the cluster said at its start
   * (`learnRecordLimits`): its tasks' collectors refuse a larger output where it is made.
   */
  readonly recordLimits = new Map<string, number>();

  constructor(settings: KafkaSettings, logger: Logger) {
    // A different kafkajs, or a load-time change to it that did not install: fail now, clearly.
    assertKafkajsPatched();
    this.settings = settings;
    this.logger = logger;
    const security = securityOptions(settings);
    this.kafka = new Kafka({
      clientId: settings.clientId,
      brokers: [...settings.brokers],
      requestTimeout: settings.requestTimeoutMs,
      connectionTimeout: 5000,
      logLevel: kafkaLogLevelFor(logger.level),
      logCreator: kafkaLogCreator(logger),
      // A broker outage costs latency, not data: keep retrying for a long while before giving up.
      retry: { initialRetryTime: 200, maxRetryTime: 5000, retries: 12 },
      // TLS and SASL (holds the key and the password: never log these options).
      ...security,
    });
    this.#ssl = security.ssl;
    if (settings.ssl?.enabled && !settings.ssl.rejectUnauthorized)
      logger.warn('kafka.ssl.rejectUnauthorized is false: broker certificates are not verified');
  }

  /**
   * The shared, connected admin client. Callers that ask at the same time (worker start, a
   * /status request) share one connection attempt: two would leave one admin open and keep the
   * process alive after close(). A failed attempt is forgotten, so the next caller tries again.
   */
  admin(): Promise<KafkaAdmin> {
    if (!this.#admin) {
      const p = (async () => {
        // A refused login or an untrusted certificate is not retriable: say so, once, clearly.
        await tlsPreflight(this.settings, this.#ssl);
        const raw: Admin = this.kafka.admin();
        await raw.connect().catch((e) => {
          throw asAuthError(e, this.settings);
        });
        return new KafkaAdmin(raw, this.kafka);
      })();
      this.#admin = p;
      p.catch(() => {
        if (this.#admin === p) this.#admin = undefined;
      });
    }
    return this.#admin;
  }

  /** `behind`: these input partitions are behind (their task's sends linger longer, see PlainProducer). */
  async plainProducer(behind?: (partitions: readonly string[]) => boolean): Promise<PlainProducer> {
    const p: Producer = this.kafka.producer({
      idempotent: true,
      maxInFlightRequests: 5,
      allowAutoTopicCreation: false,
      createPartitioner: createKeyPartitioner(),
    });
    await p.connect();
    const plain = new PlainProducer(p, this.settings.lingerMs ?? 0, behind);
    plain.limits = this.recordLimits;
    return plain;
  }

  /**
   * A transactional producer, fenced: when this resolves, InitProducerId with `transactionalId`
   * has bumped the epoch, so no earlier producer with the same id can commit any more, and its
   * open transaction is aborted (see {@link TransactionalProducer.fence}).
   */
  async transactionalProducer(
    transactionalId: string,
    timeoutMs: number = TRANSACTION_TIMEOUT_MS,
  ): Promise<TransactionalProducer> {
    const p: Producer = this.kafka.producer({
      transactionalId,
      idempotent: true,
      // A checkpoint's requests go pipelined on the connection (producer.ts): with 1, the
      // offsets waited for the Produce and every step cost a round trip through the event loop.
      // Produce requests stay one at a time per broker (kafkajs's broker lock for idempotent
      // producers, held in send-messages.ts), so sequence numbers stay in order; 5 is the
      // most the Java client allows an idempotent producer.
      maxInFlightRequests: 5,
      allowAutoTopicCreation: false,
      transactionTimeout: timeoutMs,
      createPartitioner: createKeyPartitioner(),
    });
    await p.connect();
    const tp = new TransactionalProducer(p, transactionalId, timeoutMs);
    tp.limits = this.recordLimits;
    try {
      await tp.fence();
    } catch (e) {
      await tp.close();
      throw e;
    }
    return tp;
  }

  /** A reader of single partitions outside any group (changelog restore). Close it after use. */
  partitionReader(): PartitionReader {
    return new PartitionReader(this.kafka);
  }

  consumer(opts: GroupConsumerOptions): GroupConsumer {
    return new GroupConsumer(this.kafka, this.settings, opts, this.logger);
  }

  /**
   * Closes the shared admin client; the next {@link admin} connects a new one. A kafkajs admin
   * puts every topic it was asked about into each of its metadata requests, so once one of them
   * is deleted every call fails (UNKNOWN_TOPIC_OR_PARTITION), creating it again included.
   */
  async renewAdmin(): Promise<void> {
    const a = this.#admin;
    this.#admin = undefined;
    await (await a?.catch(() => undefined))?.close();
  }

  async close(): Promise<void> {
    await this.renewAdmin();
  }
}
