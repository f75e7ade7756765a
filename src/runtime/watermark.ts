import type { SubTopology } from '../topology/build.js';

/**
 * A task's event time: per input topic (of its one partition) the max event time seen; the
 * watermark is the minimum over the stream inputs, less the allowed disorder.
 */
export class Watermark {
  /** Event time per input topic (max seen). */
  readonly #maxTs = new Map<string, number>();
  #watermark: number | undefined;
  #topics: string[] = [];
  readonly #maxOutOfOrdernessMs: number;

  constructor(maxOutOfOrdernessMs: number) {
    this.#maxOutOfOrdernessMs = maxOutOfOrdernessMs;
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

  /** Forgets every time and the watermark (a task's init); `topics` are the ones that make it. */
  reset(topics: string[]): void {
    this.#maxTs.clear();
    this.#watermark = undefined;
    this.#topics = topics;
  }

  /** Recomputes the watermark from the partitions' times: the new one if it moved forward, else undefined. */
  advance(): number | undefined {
    if (this.#topics.length === 0) return undefined;
    let min = Number.POSITIVE_INFINITY;
    for (const t of this.#topics) {
      const v = this.#maxTs.get(t);
      if (v === undefined) return undefined; // a partition not heard from yet holds the watermark back
      if (v < min) min = v;
    }
    const w = min - this.#maxOutOfOrdernessMs;
    if (this.#watermark !== undefined && w <= this.#watermark) return undefined;
    this.#watermark = w;
    return w;
  }
}

/** Stream inputs (not tables) make the watermark: a table's updates carry no event-time promise. */
export function watermarkTopics(sub: SubTopology): string[] {
  return sub.sourceTopics.filter((t) => {
    const s = sub.sources.get(t)?.spec;
    return !(s?.kind === 'source' && s.table);
  });
}

/** The offset commit's metadata carrying a partition's event time (`{"t": ms}`), or null. */
export function eventTimeMetadata(t: number | undefined): string | null {
  return t === undefined ? null : JSON.stringify({ t });
}

/** The event time a task committed with its offset (`{"t": ms}`), if any. */
export function eventTimeOf(metadata: string | null | undefined): number | undefined {
  if (!metadata) return undefined;
  try {
    const t = (JSON.parse(metadata) as { t?: unknown }).t;
    return typeof t === 'number' && Number.isFinite(t) ? t : undefined;
  } catch {
    return undefined;
  }
}
