import { TopologyError } from '../errors.js';
import type { ProcessContext, Processor, RecordContext, TimerContext } from './context.js';
import { json, type Serde } from './serdes.js';
import { type ValueStateDescriptor, valueState } from './state.js';

/**
 * Event-time windows, as in Kafka Streams and Flink. Every window is per key. A window closes
 * when the task's watermark reaches its close time (its end plus `grace`); a record whose
 * windows are all closed is late: it goes to the `.late(topic)` side output or is dropped, and
 * is counted in `sluice_late_records_total` either way. Closed windows are deleted from the
 * store (a tombstone in the changelog), so window state stays as large as the open windows.
 *
 * - `tumbling(size)`: windows `[k·size, (k+1)·size)`, one per record.
 * - `hopping(size, advance)`: windows `[k·advance, k·advance + size)`, `size / advance` per record.
 * - `sliding(size)`: for each distinct record time `t` of a key, the window `[t − size, t]`
 *   (both ends included) over every record of the key in that range; closes at `t + grace`.
 * - `session(gap)`: records of a key less than or equal to `gap` apart form one session
 *   `[first, last]`; sessions merge when a record bridges them; a session closes at
 *   `last + gap + grace`. A record is late when `t + grace ≤ watermark`.
 */
export type WindowSpec =
  | { readonly type: 'tumbling'; readonly size: number; readonly advance: number }
  | { readonly type: 'hopping'; readonly size: number; readonly advance: number }
  | { readonly type: 'sliding'; readonly size: number }
  | { readonly type: 'session'; readonly gap: number };

function positiveMs(what: string, v: number): number {
  if (!Number.isSafeInteger(v) || v <= 0)
    throw new TopologyError(`${what} must be a positive integer of ms, got ${v}`);
  return v;
}

/** Fixed, non-overlapping windows of `sizeMs`. @example .window(tumbling(60_000)).count() */
export function tumbling(sizeMs: number): WindowSpec {
  const size = positiveMs('tumbling window size', sizeMs);
  return { type: 'tumbling', size, advance: size };
}

/** Fixed windows of `sizeMs` starting every `advanceMs`. @example .window(hopping(60_000, 10_000)) */
export function hopping(sizeMs: number, advanceMs: number): WindowSpec {
  const size = positiveMs('hopping window size', sizeMs);
  const advance = positiveMs('hopping window advance', advanceMs);
  if (advance > size)
    throw new TopologyError(`hopping window advance (${advance}) exceeds its size (${size})`);
  return { type: 'hopping', size, advance };
}

/** A window `[t − sizeMs, t]` ending at each record. @example .window(sliding(5_000)).reduce(max) */
export function sliding(sizeMs: number): WindowSpec {
  return { type: 'sliding', size: positiveMs('sliding window size', sizeMs) };
}

/** Sessions of activity separated by gaps longer than `gapMs`. @example .window(session(30_000)) */
export function session(gapMs: number): WindowSpec {
  return { type: 'session', gap: positiveMs('session gap', gapMs) };
}

/** A window's bounds: `start` inclusive; `end` exclusive for tumbling/hopping, inclusive otherwise. */
export interface WindowBounds {
  readonly start: number;
  readonly end: number;
}

/** What a windowed aggregation emits: the key stays the record key. */
export interface Windowed<R> extends WindowBounds {
  readonly value: R;
}

export interface WindowOptions {
  /** How long after a window's end records are still accepted (ms of event time). Default 0. */
  grace?: number;
  /** `final` (default): one result when the window closes. `update`: a result on every change. */
  emit?: 'final' | 'update';
  /**
   * With `emit: 'update'`: through the record cache (default true), the newest result per key
   * and window at each checkpoint; `false`: every change.
   */
  cache?: boolean;
}

/** How a windowed operator folds records into a window's accumulator. */
export interface WindowFold<V, A, R> {
  init(): A;
  add(acc: A, value: V, ctx: RecordContext<any>): A;
  /** Combines two accumulators (session windows that merge). */
  merge?(a: A, b: A): A;
  result(acc: A, window: WindowBounds, key: unknown): R | undefined;
  serde?: Serde<A> | undefined;
}

type Acc = unknown;
type Ctx = ProcessContext<unknown, Windowed<unknown>, { w: ValueStateDescriptor<any> }> & {
  late(value: unknown): void;
};
type TCtx = TimerContext<unknown, Windowed<unknown>, { w: ValueStateDescriptor<any> }>;

/**
 * The window operator as a keyed processor: one state entry per key holding its open windows
 * (JSON), one event-time timer per window close. Everything goes through the task's checkpoint:
 * windows, timers and results are exactly-once together.
 */
export function windowProcessor(
  spec: WindowSpec,
  fold: WindowFold<any, any, any>,
  opts: WindowOptions,
): Processor<any, any, Windowed<unknown>, { w: ValueStateDescriptor<any> }> {
  const grace = opts.grace ?? 0;
  if (!Number.isSafeInteger(grace) || grace < 0)
    throw new TopologyError(`window grace must be ≥ 0 ms, got ${grace}`);
  const updates = opts.emit === 'update';
  const emitResult = (ctx: Ctx | TCtx, b: WindowBounds, acc: Acc, ts: number) => {
    const value = fold.result(acc, b, ctx.key);
    if (value !== undefined) ctx.emit({ start: b.start, end: b.end, value }, { timestamp: ts });
  };
  const state = { w: valueState<any>(json()) };
  switch (spec.type) {
    case 'tumbling':
    case 'hopping': {
      const { size, advance } = spec;
      // State: [start, acc][] sorted by start.
      return {
        state,
        onRecord(value, c) {
          const ctx = c as Ctx;
          const t = ctx.timestamp;
          const w = ctx.watermark;
          const wins: Array<[number, Acc]> = ctx.state.w.get() ?? [];
          let accepted = false;
          const last = t - (((t % advance) + advance) % advance);
          for (let start = last; start > t - size; start -= advance) {
            const close = start + size + grace;
            if (w !== undefined && close <= w) continue;
            accepted = true;
            const i = indexWhere(wins, (x) => x[0] >= start);
            if (wins[i]?.[0] !== start) {
              wins.splice(i, 0, [start, fold.init()]);
              ctx.timers.atEventTime(close);
            }
            const e = wins[i]!;
            e[1] = fold.add(e[1], value, ctx);
            if (updates) emitResult(ctx, { start, end: start + size }, e[1], ctx.timestamp);
          }
          if (!accepted) return ctx.late(value);
          ctx.state.w.set(wins);
        },
        onTimer(ts, ctx) {
          const wins: Array<[number, Acc]> = ctx.state.w.get() ?? [];
          let n = 0;
          while (n < wins.length && wins[n]![0] + size + grace <= ts) {
            const [start, acc] = wins[n]!;
            if (!updates) emitResult(ctx, { start, end: start + size }, acc, start + size - 1);
            n++;
          }
          if (n === 0) return;
          wins.splice(0, n);
          if (wins.length === 0) ctx.state.w.clear();
          else ctx.state.w.set(wins);
        },
      };
    }
    case 'session': {
      const { gap } = spec;
      if (!fold.merge) throw new TopologyError('session windows need a merge function to combine sessions');
      const merge = fold.merge;
      // State: [start, end, acc][] sorted by start, disjoint (more than `gap` apart).
      return {
        state,
        onRecord(value, c) {
          const ctx = c as Ctx;
          const t = ctx.timestamp;
          const w = ctx.watermark;
          if (w !== undefined && t + grace <= w) return ctx.late(value);
          const all: Array<[number, number, Acc]> = ctx.state.w.get() ?? [];
          let start = t;
          let end = t;
          let acc = fold.add(fold.init(), value, ctx);
          const keep: Array<[number, number, Acc]> = [];
          for (const s of all) {
            if (t >= s[0] - gap && t <= s[1] + gap) {
              // The record bridges into this session: merge it (its timer goes stale, see onTimer).
              start = Math.min(start, s[0]);
              end = Math.max(end, s[1]);
              acc = merge(s[2], acc);
            } else keep.push(s);
          }
          const i = indexWhere(keep, (s) => s[0] > start);
          keep.splice(i, 0, [start, end, acc]);
          ctx.timers.atEventTime(end + gap + grace);
          ctx.state.w.set(keep);
          if (updates) emitResult(ctx, { start, end }, acc, end);
        },
        onTimer(ts, ctx) {
          const all: Array<[number, number, Acc]> = ctx.state.w.get() ?? [];
          const keep = all.filter((s) => {
            if (s[1] + gap + grace > ts) return true;
            if (!updates) emitResult(ctx, { start: s[0], end: s[1] }, s[2], s[1]);
            return false;
          });
          if (keep.length === all.length) return;
          if (keep.length === 0) ctx.state.w.clear();
          else ctx.state.w.set(keep);
        },
      };
    }
    case 'sliding': {
      const { size } = spec;
      // State: { r: [t, value][] sorted by t (the records open windows may still need),
      //          p: window ends (record times) not closed yet, sorted }.
      type S = { r: Array<[number, unknown]>; p: number[] };
      const compute = (s: S, end: number, ctx: RecordContext<any>) => {
        let acc = fold.init();
        for (const [t, v] of s.r) if (t >= end - size && t <= end) acc = fold.add(acc, v, ctx);
        return acc;
      };
      return {
        state,
        onRecord(value, c) {
          const ctx = c as Ctx;
          const t = ctx.timestamp;
          const w = ctx.watermark;
          if (w !== undefined && t + grace <= w) return ctx.late(value);
          const s: S = ctx.state.w.get() ?? { r: [], p: [] };
          const i = indexWhere(s.r, (x) => x[0] > t);
          s.r.splice(i, 0, [t, value]);
          if (!s.p.includes(t)) {
            const j = indexWhere(s.p, (x) => x > t);
            s.p.splice(j, 0, t);
            ctx.timers.atEventTime(t + grace);
          }
          ctx.state.w.set(s);
          if (updates) {
            for (const end of s.p) {
              if (end >= t && end - size <= t)
                emitResult(ctx, { start: end - size, end }, compute(s, end, ctx), end);
            }
          }
        },
        onTimer(ts, ctx) {
          const s: S | undefined = ctx.state.w.get();
          if (!s) return;
          const rctx = { key: ctx.key, timestamp: ts } as RecordContext<any>;
          while (s.p.length > 0 && s.p[0]! + grace <= ts) {
            const end = s.p.shift()!;
            if (!updates) emitResult(ctx, { start: end - size, end }, compute(s, end, rctx), end);
          }
          // Records no open (or future on-time) window can contain any more.
          s.r = s.r.filter(([t]) => t + size + grace > ts);
          if (s.r.length === 0 && s.p.length === 0) ctx.state.w.clear();
          else ctx.state.w.set(s);
        },
      };
    }
  }
}

/** The first index where `pred` holds, else the length: where to insert into a sorted list. */
function indexWhere<T>(list: readonly T[], pred: (x: T) => boolean): number {
  const i = list.findIndex(pred);
  return i < 0 ? list.length : i;
}
