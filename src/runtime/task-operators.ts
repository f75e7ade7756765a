import { RECORD_CACHE, type RecordCacheMode } from '../api/record-cache-mode.js';
import type { SluiceConfig } from '../config/schema.js';
import { OperatorError, SluiceError } from '../errors.js';
import type { PlainProducer } from '../kafka/producer.js';
import type { TopicPartitionOffset } from '../kafka/types.js';
import type { Logger } from '../ops/logger.js';
import type { WorkerMetrics } from '../ops/metrics.js';
import type { OperatorCostSampler } from '../overload/operator-cost.js';
import { createShedOp } from '../overload/shed-op.js';
import type { TaskShedder } from '../overload/shedder.js';
import type { SubTopology } from '../topology/build.js';
import type { GraphNode } from '../topology/nodes.js';
import type { CheckpointDeps } from './checkpoint.js';
import { applyCacheFlushErrorPolicy, type DeadLetterContext } from './dead-letter.js';
import { compileOperators, type Op } from './operators.js';
import { type FlushGuard, RecordCache } from './record-cache.js';
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
      if (!d.store)
        throw new SluiceError(
          'SLUICE_TOPOLOGY_INVALID',
          `operator ${node.name} needs state but the task has none`,
        );
      const mode = cacheModeOf(node);
      const out = mode === undefined ? down : d.recordCache.wrap(node.id, node.name, down, rc, slotOf(mode));
      return d.store.processOp(node, out, rc, progress.collector, late);
    },
    { late: (operator, action) => d.metrics.lateRecords.inc({ app: d.appId, operator, action }) },
    d.opCounts,
    (node, down) => createShedOp(node, down, { shedder: d.shedder, rc, emitter: progress.collector }),
    d.costs,
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

/**
 * Runs one update flushed from the record cache downstream like a timer's outputs: taken back
 * if a downstream operator throws, and that error through the error policy (a dead letter of
 * kind `cache`); a fault of Sluice or the machine is rethrown (the checkpoint fails, the task
 * resets).
 */
export function cacheFlushGuard(dlq: DeadLetterContext): FlushGuard {
  return (push, e, operator) => {
    const collector = dlq.emitter as TaskProgress['collector'];
    const mark = collector.count;
    try {
      push();
    } catch (err) {
      collector.truncate(mark);
      if (!(err instanceof OperatorError)) throw err;
      applyCacheFlushErrorPolicy(dlq, { key: e.key, timestamp: e.timestamp, operator }, err);
    }
  };
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
  logger: Logger;
  metrics: WorkerMetrics;
  deadLetterTopic: string;
  rc: MutableRecordContext;
  progress: TaskProgress;
  shedder: TaskShedder;
  costs: OperatorCostSampler;
  plainProducer: () => Promise<PlainProducer>;
  recordCacheShare?: (() => number) | undefined;
  moveWatermark: () => void;
  commitOffsets: (offsets: TopicPartitionOffset[]) => Promise<void>;
}

/** A task's record loop, record cache and checkpoint dependencies, sharing one error policy. */
export function taskParts(d: TaskPartsDeps): {
  loop: RecordLoop;
  recordCache: RecordCache;
  checkpointDeps: CheckpointDeps;
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
    cacheFlushGuard({ ...deadLetter, appId, partition, metrics, emitter: d.progress.collector }),
  );
  const checkpointDeps: CheckpointDeps = {
    appId,
    taskId: d.taskId,
    groupId: d.groupId,
    partition,
    eos: d.eos,
    logger: d.logger,
    metrics,
    deadLetterTopic: d.deadLetterTopic,
    overflowTopic: d.shedder.overflowTopic,
    plainProducer: () => d.plainProducer(),
    commitOffsets: d.commitOffsets,
  };
  return { loop, recordCache, checkpointDeps };
}
