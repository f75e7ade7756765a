import type { SluiceConfig } from '../config/schema.js';
import type { KafkaClient } from '../kafka/client.js';
import type { Logger } from '../ops/logger.js';
import type { WorkerMetrics } from '../ops/metrics.js';
import type { Task } from './task.js';
import type { TaskState } from './task-state.js';

/** Opens a task's keyed state (none for stateless sub-topologies). */
export async function openTaskState(
  task: Task,
  _ctx: { client: KafkaClient; metrics: WorkerMetrics; logger: Logger; config: Readonly<SluiceConfig>; appId: string },
): Promise<TaskState | undefined> {
  if (task.sub.stores.length === 0) return undefined;
  throw new Error('keyed state is not available yet');
}
