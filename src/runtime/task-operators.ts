import { RECORD_CACHE, type RecordCacheMode } from '../api/record-cache-mode.js';
import type { SluiceConfig } from '../config/schema.js';
import { SluiceError } from '../errors.js';
import type { PlainProducer } from '../kafka/producer.js';
import type { TopicPartitionOffset } from '../kafka/types.js';
import type { Logger } from '../ops/logger.js';
import type { WorkerMetrics } from '../ops/metrics.js';
import type { OperatorCostSampler } from '../overload/operator-cost.js';
import { createShedOp } from '../overload/shed-op.js';
import type { TaskShedder } from '../overload/shedder.js';
import type { SubTopology } from '../topology/build.js';
import type { GraphNode } from '../topology/nodes.js';
import { type AsyncStageDeps, createAsyncStage } from './async-ops.js';
import type { AsyncStage } from './async-stage.js';
import { type CheckpointDeps, countOutputs } from './checkpoint.js';
import { compileOperators, type Op } from './operators.js';
import { OutputStream } from './output-stream.js';
import { RecordCache } from './record-cache.js';
import type { MutableRecordContext } from './record-context.js';
import { RecordLoop } from './record-loop.js';
import type { TaskProgress } from './task-progress.js';
import type { TaskState } from './task-state.js';

/** What a task's operators are compiled against. */
export interface TaskOperatorDeps {
  appId: string;
  sub: SubTopology;
  rc: MutableRecordContext;
  progress: TaskProgress;
  store: TaskState | undefined;
  metrics: WorkerMetrics;
  opCounts: Float64Array | undefined;
  shedder: TaskShedder;
  costs: OperatorCostSampler;
  recordCache: RecordCache;
  /** Async stages get built with these; the compiled stages are added to `asyncStages`. */
  async: AsyncStageDeps;
  asyncStages: AsyncStage[];
}

/**
 * Compiles a task's operators: stateful ones against its state, aggregations that emit every
 * update behind its record cache (see record-cache.ts), shed operators against its shedder.
 */
export function compileTaskOperators(d: TaskOperatorDeps): Map<string, Op> {
  const { rc, progress } = d;
  return compileOperators(
    d.sub.sources,
    rc,
    progress.collector,
    (node, down, late) => {
      if (!d.store) throw noState(node);
      const mode = cacheModeOf(node);
      const out = mode === undefined ? down : d.recordCache.wrap(node.id, node.name, down, rc, slotOf(mode));
      return d.store.processOp(node, out, rc, progress.collector, late);
    },
    { late: (operator, action) => d.metrics.lateRecords.inc({ app: d.appId, operator, action }) },
    d.opCounts,
    (node, down) => createShedOp(node, down, { shedder: d.shedder, rc, emitter: progress.collector }),
    d.costs,
    (node, down) => {
      const keyed = d.store?.keyed;
      if (!keyed) throw noState(node);
      const stage = createAsyncStage(node, down, rc, keyed, d.async);
      d.asyncStages.push(stage);
      return stage;
    },
  );
}

function noState(node: GraphNode): SluiceError {
  return new SluiceError(
    'SLUICE_TOPOLOGY_INVALID',
    `operator ${node.name} needs state but the task has none`,
  );
}

function cacheModeOf(node: GraphNode): RecordCacheMode | undefined {
  if (node.spec.kind !== 'process') return undefined;
  return (node.spec.processor as { [RECORD_CACHE]?: RecordCacheMode })[RECORD_CACHE];
}

/** Windowed updates are held per window (its start), keyed ones per key alone. */
function slotOf(mode: RecordCacheMode): ((v: unknown) => unknown) | undefined {
  return mode === 'window' ? (v) => (v as { start: number }).start : undefined;
}

/** What {@link taskParts} builds a task's record loop, record cache and commit protocol from. */
export interface TaskPartsDeps {
  appId: string;
  groupId: string;
  taskId: string;
  partition: number;
  sub: SubTopology;
  config: Readonly<SluiceConfig>;
  eos: boolean;
  /** Exactly-once v2: checkpoints go in the worker's transactions (TaskDeps.transactions). */
  transactions?: unknown;
  logger: Logger;
  metrics: WorkerMetrics;
  deadLetterTopic: string;
  rc: MutableRecordContext;
  progress: TaskProgress;
  shedder: TaskShedder;
  costs: OperatorCostSampler;
  plainProducer: () => Promise<PlainProducer>;
  opCounts?: Float64Array | undefined;
  recordCacheShare?: (() => number) | undefined;
  moveWatermark: () => void;
  commitOffsets: (offsets: TopicPartitionOffset[]) => Promise<void>;
}

/**
 * A task's record loop, record cache and checkpoint dependencies (at-least-once: with its
 * queue of sends, output-stream.ts), sharing one error policy.
 */
export function taskParts(d: TaskPartsDeps): {
  loop: RecordLoop;
  recordCache: RecordCache;
  checkpointDeps: CheckpointDeps;
  /** After each batch: the record cache back within its bound, then (at-least-once) the outputs sent. */
  afterBatch: () => void;
  /** Compiles the operators against the state of one start (see {@link compileTaskOperators}). */
  compile: (
    store: TaskState | undefined,
    async: AsyncStageDeps,
    asyncStages: AsyncStage[],
  ) => Map<string, Op>;
} {
  const deadLetter = {
    policy: d.config.processing.errorPolicy,
    logger: d.logger,
    deadLetterTopic: d.deadLetterTopic,
    seen: new Set<string>(),
  };
  const { appId, partition, metrics } = d;
  const loop = new RecordLoop({
    appId,
    partition,
    sub: d.sub,
    rc: d.rc,
    progress: d.progress,
    shedder: d.shedder,
    costs: d.costs,
    metrics,
    moveWatermark: d.moveWatermark,
    deadLetter,
  });
  const recordCache = new RecordCache(
    () => d.recordCacheShare?.() ?? d.config.state.recordCacheMaxBytes,
    loop.cacheGuard,
  );
  const checkpointDeps: CheckpointDeps = {
    appId,
    taskId: d.taskId,
    groupId: d.groupId,
    partition,
    eos: d.eos,
    sharedTransaction: d.eos && d.transactions !== undefined,
    logger: d.logger,
    metrics,
    deadLetterTopic: d.deadLetterTopic,
    overflowTopic: d.shedder.overflowTopic,
    plainProducer: () => d.plainProducer(),
    commitOffsets: d.commitOffsets,
  };
  // Outputs sent early may linger while these partitions are behind (PlainProducer.send).
  const from = d.sub.sourceTopics.map((t) => `${t}:${partition}`);
  if (!d.eos)
    checkpointDeps.outputs = new OutputStream({
      send: async (records, early) => {
        const p = await d.plainProducer();
        // Later outputs go into record batches as they come.
        if (d.progress.collector.partitionsOf === undefined) d.progress.batchWith(p);
        return p.send(records, early ? from : undefined);
      },
      sent: (outputs) => countOutputs(checkpointDeps, outputs),
      progress: d.progress,
    });
  const outputs = checkpointDeps.outputs;
  const afterBatch = () => {
    if (recordCache.size > 0) recordCache.evict();
    outputs?.flush();
  };
  const { sub, rc, progress, shedder, costs, opCounts } = d;
  const compile = (store: TaskState | undefined, async: AsyncStageDeps, asyncStages: AsyncStage[]) =>
    compileTaskOperators({
      appId,
      metrics,
      opCounts,
      sub,
      rc,
      progress,
      shedder,
      costs,
      recordCache,
      store,
      async,
      asyncStages,
    });
  return { loop, recordCache, checkpointDeps, afterBatch, compile };
}
