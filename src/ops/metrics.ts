import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { TransactionPhases } from '../kafka/producer.js';
import type { GraphNode } from '../topology/nodes.js';

/**
 * Worker metrics, defined once with name and help constants. The registry is passed in, never
 * the global one, so that two workers in one process (tests) do not share counters.
 * Labels are bounded: app, topic, partition, task, store, operator — never a record key.
 */
export const METRIC = {
  recordsIn: { name: 'sluice_records_in_total', help: 'Records read from input topics.' },
  recordsOut: { name: 'sluice_records_out_total', help: 'Records written to output topics (acknowledged).' },
  recordsDeadLettered: {
    name: 'sluice_records_dead_lettered_total',
    help: 'Records sent to the dead-letter topic (or skipped) by reason.',
  },
  checkpoints: {
    name: 'sluice_checkpoints_total',
    help: 'Checkpoints completed (outputs + changelog + offsets committed).',
  },
  checkpointDuration: {
    name: 'sluice_checkpoint_duration_seconds',
    help: 'Time to commit one checkpoint of a task.',
  },
  checkpointFailures: {
    name: 'sluice_checkpoint_failures_total',
    help: 'Checkpoints that failed and made the task rebuild.',
  },
  processingTime: {
    name: 'sluice_process_duration_seconds',
    help: 'Time to process one batch of records of a task.',
  },
  latency: { name: 'sluice_end_to_end_latency_seconds', help: 'Now minus record timestamp, at output.' },
  lag: {
    name: 'sluice_consumer_lag',
    help: 'Records between the committed/processed position and the log end.',
  },
  tasks: { name: 'sluice_tasks', help: 'Tasks owned by this worker, by state.' },
  rebalances: { name: 'sluice_rebalances_total', help: 'Group rebalances this worker took part in.' },
  restoreRecords: {
    name: 'sluice_restore_records_total',
    help: 'Changelog records replayed to restore state.',
  },
  restoreDuration: {
    name: 'sluice_restore_duration_seconds',
    help: 'Time to restore one task from its changelog.',
  },
  restoreRemaining: {
    name: 'sluice_restore_remaining_records',
    help: 'Changelog records left to replay, per task.',
  },
  changelogRecords: { name: 'sluice_changelog_records_total', help: 'Records written to changelog topics.' },
  cacheHits: { name: 'sluice_state_cache_hits_total', help: 'State reads served by the write-back cache.' },
  cacheMisses: { name: 'sluice_state_cache_misses_total', help: 'State reads that went to RocksDB.' },
  cacheBytes: { name: 'sluice_state_cache_bytes', help: 'Approximate bytes held in the write-back caches.' },
  txCommits: { name: 'sluice_transaction_commits_total', help: 'Kafka transactions committed.' },
  txAborts: { name: 'sluice_transaction_aborts_total', help: 'Kafka transactions aborted.' },
  errors: { name: 'sluice_errors_total', help: 'Errors by kind.' },
  lateRecords: {
    name: 'sluice_late_records_total',
    help: 'Records that arrived after their window closed: sent to the late side output or dropped.',
  },
  checkpointRecords: {
    name: 'sluice_checkpoint_records',
    help: 'Records one checkpoint of a task committed (outputs, dead letters and changelog records).',
  },
  checkpointBytes: {
    name: 'sluice_checkpoint_bytes',
    help: 'Key and value bytes one checkpoint of a task committed.',
  },
  transactionPhase: {
    name: 'sluice_transaction_phase_seconds',
    help: "Phases of the worker's committed exactly-once v2 transactions: queued (a checkpoint waiting for the transaction in flight, or for the producer made again after a failed one), begin, produce and offsets (from the commit's start until the last Produce, resp. the TxnOffsetCommit, was answered; they overlap), end (EndTxn).",
  },
  transactionProduceRequests: {
    name: 'sluice_transaction_produce_requests',
    help: 'Produce requests per committed exactly-once v2 transaction of the worker, sent one after the other.',
  },
  stateStoreBytes: {
    name: 'sluice_state_store_bytes',
    help: "Bytes a task's RocksDB occupies on disk (SST files, WAL, manifest), refreshed every few seconds.",
  },
  inputRate: {
    name: 'sluice_input_rate',
    help: 'Records per second this worker processed from an input partition, over the last 5 s.',
  },
  arrivalRate: {
    name: 'sluice_arrival_rate',
    help: 'Records per second arriving on an input partition (growth of its log-end offset), smoothed.',
  },
  capacity: {
    name: 'sluice_capacity',
    help: "Records a task's operator chain processes per busy second, smoothed.",
  },
  shedFraction: { name: 'sluice_shed_fraction', help: 'Fraction of records a task sheds now (0..1).' },
  recordsShed: { name: 'sluice_records_shed_total', help: 'Records shed under overload, by reason.' },
  recommendedWorkers: {
    name: 'sluice_recommended_workers',
    help: 'Workers the app needs to process its input within the headroom (DS2), clamped to [1, partitions].',
  },
  operatorCost: {
    name: 'sluice_operator_cost_seconds',
    help: 'Mean time one record spends in an operator itself (sampled), smoothed.',
  },
  asyncInFlight: {
    name: 'sluice_async_in_flight',
    help: "Records in a task's async stages (waiting, running or done but not yet in order), per task.",
  },
  asyncDuration: {
    name: 'sluice_async_duration_seconds',
    help: 'Time a record spends in an async stage, from entering it to leaving it (retries and order waits included).',
  },
  asyncTimeouts: {
    name: 'sluice_async_timeouts_total',
    help: "Attempts of an async operator's function that timed out (timeoutMs).",
  },
  asyncRetries: {
    name: 'sluice_async_retries_total',
    help: "Retries of an async operator's function (after a throw or a timeout).",
  },
} as const;

/**
 * Records per checkpoint: one record (a lone timer or a trickle) up to a busy task's 100 ms of
 * input at 1e6 records/s. Bytes: from one small record to 64 MiB, past which a transaction is
 * in trouble anyway (the broker's default message.max.bytes is 1 MiB per batch).
 */
const CHECKPOINT_RECORD_BUCKETS = [1, 10, 50, 100, 500, 1000, 5000, 10_000, 50_000, 100_000];
const CHECKPOINT_BYTE_BUCKETS = [
  256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304, 16_777_216, 67_108_864,
];

/** Kinds of `sluice_errors_total` and reasons of `sluice_records_dead_lettered_total` known up front. */
export const ERROR_KINDS = [
  'task_init',
  'timer',
  'state_corrupted',
  'checkpoint',
  'processing',
  'repartition_purge',
] as const;
export const DEAD_LETTER_REASONS = ['deserialize', 'operator'] as const;

/**
 * Creates the series of an app's counters that might otherwise appear only on the first error, at
 * zero, so that `rate()` and dashboards show 0 rather than "no data" on a healthy worker.
 */
export function initWorkerMetrics(m: WorkerMetrics, app: string, nodes: readonly GraphNode[] = []): void {
  // Async stages' timeout and retry counters (one series per operator), and windowed operators'
  // late-record counters (one series per operator and action).
  for (const n of nodes) {
    const op = { app, operator: n.name };
    if (n.spec.kind === 'async' || (n.spec.kind === 'process' && n.spec.async)) {
      m.asyncTimeouts.inc(op, 0);
      m.asyncRetries.inc(op, 0);
    }
    if (n.spec.kind !== 'late') continue;
    const action = n.spec.topic === undefined ? 'dropped' : 'side_output';
    m.lateRecords.inc({ app, operator: n.spec.operator, action }, 0);
  }
  for (const kind of ERROR_KINDS) m.errors.inc({ app, kind }, 0);
  for (const reason of DEAD_LETTER_REASONS) m.recordsDeadLettered.inc({ app, reason }, 0);
  m.checkpoints.inc({ app }, 0);
  m.rebalances.inc({ app }, 0);
  m.txCommits.inc({ app }, 0);
  m.txAborts.inc({ app }, 0);
  m.cacheHits.inc({ app }, 0);
  m.cacheMisses.inc({ app }, 0);
  for (const reason of ['random', 'priority']) m.recordsShed.inc({ app, reason }, 0);
}

/** Fine from 10 to 300 ms (a p50 of 50 ms reads to within 10 ms), coarse beyond. */
const LATENCY_BUCKETS = [
  0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3, 0.4,
  0.5, 0.75, 1, 2.5, 5, 10, 30, 60,
];
/** A transaction's phases: fine from 1 to 100 ms, where a checkpoint's parts fall. */
const PHASE_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export function createWorkerMetrics(registry: Registry) {
  const c = <L extends string>(m: { name: string; help: string }, labelNames: L[]) =>
    new Counter({ name: m.name, help: m.help, labelNames, registers: [registry] });
  // `aggregator`: how stream threads' series of one process add up on its /metrics (threaded.ts);
  // the default is their sum.
  const g = <L extends string>(
    m: { name: string; help: string },
    labelNames: L[],
    aggregator?: 'max' | 'average',
  ) =>
    new Gauge({
      name: m.name,
      help: m.help,
      labelNames,
      registers: [registry],
      ...(aggregator && { aggregator }),
    });
  const h = <L extends string>(m: { name: string; help: string }, labelNames: L[], buckets: number[]) =>
    new Histogram({ name: m.name, help: m.help, labelNames, buckets, registers: [registry] });
  return {
    recordsIn: c(METRIC.recordsIn, ['app', 'topic']),
    recordsOut: c(METRIC.recordsOut, ['app', 'topic']),
    recordsDeadLettered: c(METRIC.recordsDeadLettered, ['app', 'reason']),
    lateRecords: c(METRIC.lateRecords, ['app', 'operator', 'action']),
    checkpoints: c(METRIC.checkpoints, ['app']),
    checkpointDuration: h(METRIC.checkpointDuration, ['app'], DURATION_BUCKETS),
    checkpointFailures: c(METRIC.checkpointFailures, ['app', 'reason']),
    processingTime: h(METRIC.processingTime, ['app'], DURATION_BUCKETS),
    latency: h(METRIC.latency, ['app', 'topic'], LATENCY_BUCKETS),
    lag: g(METRIC.lag, ['app', 'topic', 'partition']),
    tasks: g(METRIC.tasks, ['app', 'state']),
    rebalances: c(METRIC.rebalances, ['app']),
    restoreRecords: c(METRIC.restoreRecords, ['app', 'store']),
    restoreDuration: h(METRIC.restoreDuration, ['app'], [0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300]),
    restoreRemaining: g(METRIC.restoreRemaining, ['app', 'task']),
    changelogRecords: c(METRIC.changelogRecords, ['app', 'store']),
    cacheHits: c(METRIC.cacheHits, ['app']),
    cacheMisses: c(METRIC.cacheMisses, ['app']),
    cacheBytes: g(METRIC.cacheBytes, ['app', 'task']),
    txCommits: c(METRIC.txCommits, ['app']),
    txAborts: c(METRIC.txAborts, ['app']),
    errors: c(METRIC.errors, ['app', 'kind']),
    checkpointRecords: h(METRIC.checkpointRecords, ['app'], CHECKPOINT_RECORD_BUCKETS),
    checkpointBytes: h(METRIC.checkpointBytes, ['app'], CHECKPOINT_BYTE_BUCKETS),
    transactionPhase: h(METRIC.transactionPhase, ['app', 'phase'], PHASE_BUCKETS),
    transactionProduceRequests: h(METRIC.transactionProduceRequests, ['app'], [1, 2, 3, 4, 6, 8, 16, 32]),
    stateStoreBytes: g(METRIC.stateStoreBytes, ['app', 'task']),
    inputRate: g(METRIC.inputRate, ['app', 'topic', 'partition']),
    arrivalRate: g(METRIC.arrivalRate, ['app', 'topic', 'partition']),
    capacity: g(METRIC.capacity, ['app', 'task']),
    shedFraction: g(METRIC.shedFraction, ['app', 'task']),
    recordsShed: c(METRIC.recordsShed, ['app', 'reason']),
    // Each thread advises on the whole group; an operator's cost is a mean.
    recommendedWorkers: g(METRIC.recommendedWorkers, ['app'], 'max'),
    operatorCost: g(METRIC.operatorCost, ['app', 'operator'], 'average'),
    asyncInFlight: g(METRIC.asyncInFlight, ['app', 'task']),
    asyncDuration: h(METRIC.asyncDuration, ['app', 'operator'], LATENCY_BUCKETS),
    asyncTimeouts: c(METRIC.asyncTimeouts, ['app', 'operator']),
    asyncRetries: c(METRIC.asyncRetries, ['app', 'operator']),
  };
}
export type WorkerMetrics = ReturnType<typeof createWorkerMetrics>;

/** Observes a committed transaction's phases (a transactional producer's `onCommitted`). */
export function transactionObserver(m: WorkerMetrics, app: string): (p: TransactionPhases) => void {
  return (p) => {
    m.transactionPhase.observe({ app, phase: 'begin' }, p.begin);
    m.transactionPhase.observe({ app, phase: 'produce' }, p.produce);
    if (p.offsets !== undefined) m.transactionPhase.observe({ app, phase: 'offsets' }, p.offsets);
    m.transactionPhase.observe({ app, phase: 'end' }, p.end);
    m.transactionProduceRequests.observe({ app }, p.requests);
  };
}

/** The prefix of Node's default metrics (prom-client's `process_*` and `nodejs_*`). */
export const NODE_METRICS_PREFIX = 'sluice_node_';

/** A registry with Node's default metrics (event loop lag, heap, GC, CPU). */
export function createRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: NODE_METRICS_PREFIX });
  return registry;
}
