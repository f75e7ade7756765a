import { WATERMARK_HEADER } from '../kafka/types.js';
import type { SubTopology } from '../topology/build.js';

/** Idleness (`processing.idleTimeoutMs`, `processing.idleAdvanceMs`): 0 turns each off. */
export interface Idleness {
  /** A stream input with no record for this long stops holding the watermark back. */
  timeoutMs: number;
  /** Every stream input quiet for this long: the watermark follows the wall clock. */
  advanceMs: number;
}

/**
 * A task's event time: per input topic (of its one partition) the max event time seen; the
 * watermark is the minimum over the active stream inputs, less the allowed disorder. An input
 * with no record for `timeoutMs` of wall time is idle and left out of the minimum (Flink's
 * `withIdleness`; all idle: the maximum over them); once every input has been quiet for `advanceMs`, the watermark moves to the
 * max event time seen plus the wall time since the last record, less the disorder, as if event
 * time kept flowing with the wall clock. The watermark never goes back.
 */
export class Watermark {
  /** Event time per input topic (max seen; for a repartition input, the writers' minimum + disorder). */
  readonly #maxTs = new Map<string, number>();
  /** Repartition inputs: the watermark each upstream writer (task partition) announced last. */
  readonly #channels = new Map<string, Channel>();
  /** Wall time of the last record per input topic (the task's start until one comes). */
  readonly #lastActive = new Map<string, number>();
  #lastRecord = 0;
  #watermark: number | undefined;
  #topics: string[] = [];
  readonly #maxOutOfOrdernessMs: number;
  readonly #idle: Idleness;

  constructor(maxOutOfOrdernessMs: number, idle: Idleness = { timeoutMs: 0, advanceMs: 0 }) {
    this.#maxOutOfOrdernessMs = maxOutOfOrdernessMs;
    this.#idle = idle;
  }

  get value(): number | undefined {
    return this.#watermark;
  }

  /** The max event time seen on a topic, if any. */
  timeOf(topic: string): number | undefined {
    return this.#maxTs.get(topic);
  }

  setTime(topic: string, t: number): void {
    this.#maxTs.set(topic, t);
  }

  /** A stream input delivered a record at wall time `now`: it is active (again). */
  touch(topic: string, now: number): void {
    this.#lastActive.set(topic, now);
    if (now > this.#lastRecord) this.#lastRecord = now;
  }

  /** The stream inputs idle at wall time `now` (none when the idle timeout is off). */
  idleTopics(now: number): string[] {
    return this.#topics.filter((t) => this.#isIdle(t, now));
  }

  #isIdle(topic: string, now: number): boolean {
    const timeout = this.#idle.timeoutMs;
    return timeout > 0 && now - (this.#lastActive.get(topic) ?? this.#lastRecord) >= timeout;
  }

  /**
   * Forgets every time and the watermark (a task's init); `topics` are the ones that make it,
   * `now` starts their idle clocks, `floor` is a committed watermark it must not fall below.
   */
  reset(topics: string[], now = 0, floor?: number): void {
    this.#maxTs.clear();
    this.#lastActive.clear();
    this.#channels.clear();
    this.#started = now;
    this.#watermark = floor;
    this.#topics = topics;
    this.#lastRecord = now;
    for (const t of topics) this.#lastActive.set(t, now);
  }

  /**
   * Recomputes the watermark from the partitions' times (and, with idleness, the wall clock
   * `now`): the new one if it moved forward, else undefined.
   */
  advance(now = 0): number | undefined {
    if (this.#topics.length === 0) return undefined;
    for (const [t, c] of this.#channels) {
      const v = this.#channelTime(c, now);
      if (v !== undefined && v > (this.#maxTs.get(t) ?? Number.NEGATIVE_INFINITY)) this.#maxTs.set(t, v);
    }
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    let held = false;
    for (const t of this.#topics) {
      const v = this.#maxTs.get(t);
      if (v !== undefined && v > max) max = v;
      if (this.#isIdle(t, now)) continue; // per record: no allocation
      if (v === undefined)
        held = true; // a partition not heard from yet holds the watermark back
      else if (v < min) min = v;
    }
    // All idle: none will move on, so the max of their times is the minimum to come (Flink's flush).
    if (min === Number.POSITIVE_INFINITY) min = max;
    let w = held || min === Number.NEGATIVE_INFINITY ? undefined : min - this.#maxOutOfOrdernessMs;
    const quiet = now - this.#lastRecord;
    if (this.#idle.advanceMs > 0 && quiet >= this.#idle.advanceMs && max > Number.NEGATIVE_INFINITY) {
      const flowing = max + quiet - this.#maxOutOfOrdernessMs;
      if (w === undefined || flowing > w) w = flowing;
    }
    if (w === undefined) return undefined;
    if (this.#watermark !== undefined && w <= this.#watermark) return undefined;
    this.#watermark = w;
    return w;
  }

  #started = 0;

  /**
   * A watermark control record on a repartition input (`value` of its {@link WATERMARK_HEADER}:
   * `writer/writers/watermark`), read at wall time `now`. A writer's watermark never goes back
   * (at-least-once may repeat an older one). False for a malformed value (ignored).
   */
  announce(topic: string, value: Buffer | string, now: number): boolean {
    const [writer, writers, w] = String(value).split('/').map(Number) as [number, number, number];
    if (!Number.isInteger(writer) || !Number.isInteger(writers) || writer < 0 || writer >= writers)
      return false;
    if (!Number.isFinite(w)) return false;
    const c = this.#channel(topic, writers);
    const before = c.times[writer];
    if (before === undefined || w > before) c.times[writer] = w;
    c.seen[writer] = now;
    return true;
  }

  #channel(topic: string, writers: number): Channel {
    let c = this.#channels.get(topic);
    if (!c || c.times.length !== writers) {
      c = { times: new Array(writers).fill(undefined), seen: new Array(writers).fill(this.#started) };
      this.#channels.set(topic, c);
    }
    return c;
  }

  /**
   * The time a repartition input stands at: the minimum over its upstream writers of their
   * watermarks (+ the disorder, subtracted again by {@link advance}); undefined while a writer has
   * not announced one. With the idle timeout, a writer silent that long is left out (all silent:
   * the largest of them).
   */
  #channelTime(c: Channel, now: number): number | undefined {
    const timeout = this.#idle.timeoutMs;
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    for (let i = 0; i < c.times.length; i++) {
      const t = c.times[i];
      if (t !== undefined && t > max) max = t;
      if (timeout > 0 && now - c.seen[i]! >= timeout) continue;
      if (t === undefined) return undefined;
      if (t < min) min = t;
    }
    if (min === Number.POSITIVE_INFINITY) min = max;
    return min === Number.NEGATIVE_INFINITY ? undefined : min + this.#maxOutOfOrdernessMs;
  }

  /** Restores a topic's committed time (`t`) and, for a repartition input, its writers' watermarks (`c`). */
  restore(topic: string, metadata: string | null | undefined): void {
    const t = eventTimeOf(metadata);
    if (t !== undefined) this.setTime(topic, t);
    const c = writersOf(metadata);
    if (c) {
      const ch = this.#channel(topic, c.length);
      for (let i = 0; i < c.length; i++) ch.times[i] = c[i] ?? undefined;
    }
  }

  /** The offset commit's metadata of a topic: its time, the watermark, its writers' watermarks. */
  metadataOf(topic: string): string | null {
    const c = this.#channels.get(topic);
    const m = eventTimeMetadata(this.#maxTs.get(topic), this.#watermark);
    if (!c) return m;
    const withWriters = JSON.stringify({ ...(m ? JSON.parse(m) : {}), c: c.times.map((x) => x ?? null) });
    // The broker refuses metadata over offset.metadata.max.bytes (4096 by default): past ~250
    // writers they are left out, and a restarted task waits for each to announce again.
    return withWriters.length <= MAX_METADATA ? withWriters : m;
  }
}

const MAX_METADATA = 4000;

interface Channel {
  /** Per upstream writer, the latest watermark it announced. */
  times: Array<number | undefined>;
  /** Per upstream writer, the wall time it was last heard from (the task's start until then). */
  seen: number[];
}

export { WATERMARK_HEADER };

function writersOf(metadata: string | null | undefined): Array<number | null> | undefined {
  if (!metadata) return undefined;
  try {
    const c = (JSON.parse(metadata) as Record<string, unknown>).c;
    return Array.isArray(c)
      ? c.map((x) => (typeof x === 'number' && Number.isFinite(x) ? x : null))
      : undefined;
  } catch {
    return undefined;
  }
}

/** Stream inputs (not tables) make the watermark: a table's updates carry no event-time promise. */
export function watermarkTopics(sub: SubTopology): string[] {
  return sub.sourceTopics.filter((t) => {
    const s = sub.sources.get(t)?.spec;
    return !(s?.kind === 'source' && s.table);
  });
}

/**
 * The offset commit's metadata carrying a partition's event time and the task's watermark
 * (`{"t": ms, "w": ms}`; the watermark may be ahead of the times when idleness moved it), or null.
 */
export function eventTimeMetadata(t: number | undefined, w?: number): string | null {
  if (t === undefined && w === undefined) return null;
  return JSON.stringify(w === undefined ? { t } : { t, w });
}

/** The event time a task committed with its offset (`{"t": ms}`), if any. */
export function eventTimeOf(metadata: string | null | undefined): number | undefined {
  return fieldOf(metadata, 't');
}

/** The highest watermark a task committed with its offsets (`{"w": ms}`), if any. */
export function committedFloor(metadata: Array<string | null | undefined>): number | undefined {
  let floor: number | undefined;
  for (const m of metadata) {
    const w = committedWatermarkOf(m);
    if (w !== undefined && (floor === undefined || w > floor)) floor = w;
  }
  return floor;
}

/** The watermark a task committed with its offset (`{"w": ms}`), if any. */
export function committedWatermarkOf(metadata: string | null | undefined): number | undefined {
  return fieldOf(metadata, 'w');
}

function fieldOf(metadata: string | null | undefined, field: 't' | 'w'): number | undefined {
  if (!metadata) return undefined;
  try {
    const v = (JSON.parse(metadata) as Record<string, unknown>)[field];
    return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
  } catch {
    return undefined;
  }
}
