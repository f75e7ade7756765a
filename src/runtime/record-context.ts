import type { RecordContext } from '../api/context.js';
import type { InRecord } from '../kafka/types.js';

/**
 * The one mutable record context of a task. The task sets its fields before pushing a record
 * through the operators, which hand it to user functions: no allocation per record.
 */
export class MutableRecordContext implements RecordContext<unknown> {
  key: unknown = null;
  topic = '';
  partition = 0;
  offset = '0';
  timestamp = 0;
  headers: Record<string, unknown> | undefined = undefined;
  /** The task's watermark (undefined until every stream input has a record). */
  watermark: number | undefined = undefined;
  /** The input record being processed (an async stage keeps it for a dead letter); none in a timer. */
  raw: InRecord | undefined = undefined;
  /** The wall clock: `Date.now`, or a test driver's own (processing time, processing-time timers). */
  now: () => number = Date.now;
}
