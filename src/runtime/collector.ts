import type { OutRecord } from '../kafka/types.js';
import type { Emitter } from './operators.js';

/**
 * Buffers a task's outputs until its next checkpoint. Outputs of a record that failed halfway
 * are taken back (`truncate`), so a poison record leaves no partial output behind.
 */
export class Collector implements Emitter {
  readonly byTopic = new Map<string, OutRecord[]>();
  /** Output count, for rollback marks. */
  count = 0;
  readonly #log: Array<OutRecord[]> = [];

  emit(
    topic: string,
    key: Buffer | null,
    value: Buffer | null,
    timestamp: number,
    headers: Record<string, unknown> | undefined,
    /** A given partition (watermark control records); else the key's hash picks it. */
    partition?: number,
  ): void {
    let list = this.byTopic.get(topic);
    if (!list) this.byTopic.set(topic, (list = []));
    const rec: OutRecord = { key, value, timestamp: String(timestamp) };
    if (headers !== undefined) rec.headers = headers as OutRecord['headers'];
    if (partition !== undefined) rec.partition = partition;
    list.push(rec);
    this.#log.push(list);
    this.count++;
  }

  /** Drops the outputs emitted after `mark` (a value of `count` taken earlier). */
  truncate(mark: number): void {
    while (this.count > mark) {
      this.#log.pop()!.pop();
      this.count--;
    }
  }

  /** Hands the buffered outputs over and starts empty. */
  drain(): Map<string, OutRecord[]> {
    const out = new Map(this.byTopic);
    this.byTopic.clear();
    this.#log.length = 0;
    this.count = 0;
    return out;
  }

  clear(): void {
    this.byTopic.clear();
    this.#log.length = 0;
    this.count = 0;
  }
}
