import type { WrittenOffsets } from '../kafka/producer.js';
import type { OutRecord } from '../kafka/types.js';
import type { GraphNode } from '../topology/nodes.js';
import type { Collector } from './collector.js';
import type { Op } from './operators.js';
import type { MutableRecordContext } from './record-context.js';

/**
 * What a task needs of its keyed state: operators bound to it, the changelog records of what
 * changed since the last checkpoint, and the local commit that follows a Kafka commit.
 */
export interface TaskState {
  /** True when some store changed since the last checkpoint. */
  readonly dirty: boolean;
  processOp(node: GraphNode, downstream: Op, rc: MutableRecordContext, collector: Collector, late?: Op): Op;
  /** Adds the latest value (or a tombstone) of every dirty key to `out`, by changelog topic. */
  writeChangelog(out: Map<string, OutRecord[]>, partition: number): void;
  /** After the Kafka commit: one atomic RocksDB batch with the dirty keys and the meta entry. */
  commitLocal(written: WrittenOffsets, inputOffsets: Record<string, string>): Promise<void>;
  /** Fires due timers (event time up to the watermark, processing time up to now; either may be skipped). */
  advanceTime(watermark: number | undefined, now: number | undefined): number;
  /** Pushes cache counters to the metrics. */
  flushCacheMetrics(): void;
  /** Sets the memory bound of the task's write-back cache (its share of the worker's). */
  resizeCache?(maxBytes: number): void;
  /**
   * Reads one key of a store for a state query: the write-back cache first (so the answer
   * includes writes not yet checkpointed), then RocksDB; `undefined` when absent.
   */
  read?(store: string, key: Buffer): unknown;
  close(): Promise<void>;
}
