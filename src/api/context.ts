import type { StateDescriptor, StateHandles, StateOption } from './state.js';

/** What an operator can know of the record it is given. One object per task, reused per record. */
export interface RecordContext<K = unknown> {
  readonly key: K;
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  /** Event time, ms since the epoch (the Kafka timestamp unless the job extracts its own). */
  readonly timestamp: number;
  readonly headers: Readonly<Record<string, unknown>> | undefined;
}

export interface Timers {
  /** Calls onTimer when the task's watermark passes `ts`. Idempotent per (key, ts). */
  atEventTime(ts: number): void;
  /** Calls onTimer when the wall clock passes `ts`. Idempotent per (key, ts). */
  atProcessingTime(ts: number): void;
  cancelEventTime(ts: number): void;
  cancelProcessingTime(ts: number): void;
}

export interface ProcessContext<K, R, S extends Record<string, StateDescriptor>> extends RecordContext<K> {
  /**
   * The task's event-time watermark: the smallest of its stream inputs' largest timestamps, less
   * `processing.maxOutOfOrdernessMs`. Undefined until every stream input of the task has a record
   * (or, with `processing.idleTimeoutMs`, has been idle that long). `processing.idleAdvanceMs`
   * moves it with the wall clock when all inputs are quiet. It never goes back.
   */
  readonly watermark: number | undefined;
  /** Keyed state, scoped to `key`. */
  readonly state: StateHandles<S>;
  readonly timers: Timers;
  /** Sends a record downstream with the current key (and timestamp unless given). */
  emit(value: R, opts?: { timestamp?: number }): void;
  /** An async onRecord's attempt is aborted (timed out) when this fires; never for a sync one. */
  readonly signal: AbortSignal;
}

export interface TimerContext<K, R, S extends Record<string, StateDescriptor>> {
  readonly key: K;
  readonly timestamp: number;
  readonly domain: 'event' | 'processing';
  readonly watermark: number | undefined;
  readonly state: StateHandles<S>;
  readonly timers: Timers;
  emit(value: R, opts?: { timestamp?: number }): void;
}

export interface Processor<K, V, R, S extends Record<string, StateDescriptor>> {
  state?: StateOption<S>;
  /**
   * Called for each record. An `async` one (or with `{ async: true }`) runs as an async stage
   * (docs/ASYNC.md): its key's state is read and written in that key's turn, its writes and
   * emits are applied together when it completes, and it may use valueState only.
   */
  onRecord(value: V, ctx: ProcessContext<K, R, S>): void | Promise<void>;
  onTimer?(timestamp: number, ctx: TimerContext<K, R, S>): void;
}

/**
 * Two keyed streams sharing one keyed state (`left.connect(right).process(...)`): records of the
 * left stream go to `onLeft`, of the right one to `onRight`, both with the state of their key.
 * @example a control stream that blocks words for a data stream
 * words.connect(blocks).process({
 *   state: { blocked: valueState<boolean>() },
 *   onLeft(w, ctx) { if (!ctx.state.blocked.get()) ctx.emit(w); },
 *   onRight(b, ctx) { if (b.blocked) ctx.state.blocked.set(true); else ctx.state.blocked.clear(); },
 * })
 */
export interface ConnectProcessor<K, L, Rt, R, S extends Record<string, StateDescriptor>> {
  state?: StateOption<S>;
  onLeft(value: L, ctx: ProcessContext<K, R, S>): void;
  onRight(value: Rt, ctx: ProcessContext<K, R, S>): void;
  onTimer?(timestamp: number, ctx: TimerContext<K, R, S>): void;
}
