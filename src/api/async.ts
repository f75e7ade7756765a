import { TopologyError } from '../errors.js';
import type { RecordContext } from './context.js';

/**
 * How records leave an async stage:
 * - `key` (default): records of one key complete and leave in input order, one at a time per
 *   key; other keys proceed meanwhile.
 * - `partition`: records leave in input order (a slow record holds back those after it).
 * - `none`: records leave as they complete.
 */
export type AsyncOrder = 'key' | 'partition' | 'none';
export const ASYNC_ORDERS: readonly AsyncOrder[] = ['key', 'partition', 'none'];

/** Options of `mapAsync`, `filterAsync`, `flatMapAsync` and of an async `process`. */
export interface AsyncOptions {
  /** Records of one task in the user function at once (default 64). */
  concurrency?: number;
  /** One attempt's time limit (default 30 s); the attempt's `ctx.signal` aborts then. */
  timeoutMs?: number;
  /** Attempts after the first when one throws or times out (default 0). */
  retries?: number;
  /** Wait before the first retry, doubled for each next one up to 30 s (default 100 ms). */
  backoffMs?: number;
  /** Output order (default `key`); see {@link AsyncOrder}. */
  ordered?: AsyncOrder;
}

/** The settings of an async stage, defaults applied. @internal */
export interface AsyncSettings {
  readonly concurrency: number;
  readonly timeoutMs: number;
  readonly retries: number;
  readonly backoffMs: number;
  readonly ordered: AsyncOrder;
}

/** What an async function is given with the value: the record's context, and an abort signal. */
export interface AsyncContext<K = unknown> extends RecordContext<K> {
  /** Aborted when this attempt times out (pass it to `fetch`); a retry gets a fresh one. */
  readonly signal: AbortSignal;
  /** 0 for the first attempt, 1 for the first retry, ... */
  readonly attempt: number;
}

/**
 * Applies the defaults and checks the options when the job is built, listing every problem.
 * @internal
 */
export function asyncSettings(operator: string, o: AsyncOptions = {}): AsyncSettings {
  const s: AsyncSettings = {
    concurrency: o.concurrency ?? 64,
    timeoutMs: o.timeoutMs ?? 30_000,
    retries: o.retries ?? 0,
    backoffMs: o.backoffMs ?? 100,
    ordered: o.ordered ?? 'key',
  };
  const problems: string[] = [];
  const int = (name: keyof AsyncSettings, min: number) => {
    const v = s[name];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min)
      problems.push(`${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  };
  int('concurrency', 1);
  int('timeoutMs', 1);
  int('retries', 0);
  int('backoffMs', 0);
  if (!ASYNC_ORDERS.includes(s.ordered))
    problems.push(`ordered must be one of ${ASYNC_ORDERS.join(', ')}, got ${JSON.stringify(s.ordered)}`);
  if (problems.length > 0) throw new TopologyError(`async operator ${operator}: ${problems.join('; ')}`);
  return s;
}

/** True for what `await` would wait for: a Promise or any other thenable. @internal */
export function isThenable(v: unknown): v is PromiseLike<unknown> {
  return (
    v !== null &&
    (typeof v === 'object' || typeof v === 'function') &&
    typeof (v as { then?: unknown }).then === 'function'
  );
}

/** True when `fn` was written `async function` / `async () =>`. @internal */
export function isAsyncFunction(fn: unknown): boolean {
  return typeof fn === 'function' && fn.constructor?.name === 'AsyncFunction';
}
