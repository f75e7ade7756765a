import type { StateDescriptor, StateHandles } from './state.js';

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
  /** Keyed state, scoped to `key`. */
  readonly state: StateHandles<S>;
  readonly timers: Timers;
  /** Sends a record downstream with the current key (and timestamp unless given). */
  emit(value: R, opts?: { timestamp?: number }): void;
}

export interface TimerContext<K, R, S extends Record<string, StateDescriptor>> {
  readonly key: K;
  readonly timestamp: number;
  readonly domain: 'event' | 'processing';
  readonly state: StateHandles<S>;
  readonly timers: Timers;
  emit(value: R, opts?: { timestamp?: number }): void;
}

export interface Processor<K, V, R, S extends Record<string, StateDescriptor>> {
  state?: S;
  onRecord(value: V, ctx: ProcessContext<K, R, S>): void;
  onTimer?(timestamp: number, ctx: TimerContext<K, R, S>): void;
}
