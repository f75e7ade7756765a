import type { Timers } from '../api/context.js';
import { decodeTimerKey, encodeTimerKey } from '../state/key-codec.js';
import type { KeyedState, TimerGuard } from './task-state.js';

type Domain = 'event' | 'processing';

interface Pending {
  ts: number;
  key: Buffer;
  domain: Domain;
  /** The store key (domain byte + timer key), as latin1 for the index. */
  id: string;
}

/**
 * The timers of one process operator in one task. Stored in the operator's timer store (a
 * changelogged column family), keyed by (domain, timestamp, key) so they sort by time, and
 * indexed in memory by a min-heap per domain. Firing deletes the timer in the same checkpoint as
 * the outputs it caused: a crash neither loses nor repeats a timer's effects.
 */
export class TimerService {
  readonly store: string;
  readonly #st: KeyedState;
  readonly #scope: { bytes: Buffer };
  readonly #live = new Map<string, Pending>();
  readonly #heaps: Record<Domain, Pending[]> = { event: [], processing: [] };
  onFire: (ts: number, key: Buffer, domain: Domain) => void = () => undefined;
  readonly api: Timers;

  constructor(store: string, st: KeyedState, scope: { bytes: Buffer }) {
    this.store = store;
    this.#st = st;
    this.#scope = scope;
    this.api = {
      atEventTime: (ts) => this.#register('event', ts),
      atProcessingTime: (ts) => this.#register('processing', ts),
      cancelEventTime: (ts) => this.#cancel('event', ts),
      cancelProcessingTime: (ts) => this.#cancel('processing', ts),
    };
    // Load what RocksDB holds (already restored from the changelog).
    for (const [k] of st.rocks.scanSync(store)) {
      const domain: Domain = k[0] === 1 ? 'processing' : 'event';
      const { ts, key } = decodeTimerKey(k.subarray(1));
      this.#push({ ts, key: Buffer.from(key), domain, id: k.toString('latin1') });
    }
  }

  get size(): number {
    return this.#live.size;
  }

  #storeKey(domain: Domain, ts: number, key: Buffer): Buffer {
    return Buffer.concat([Buffer.of(domain === 'processing' ? 1 : 0), encodeTimerKey(Math.floor(ts), key)]);
  }

  #register(domain: Domain, ts: number): void {
    if (!Number.isFinite(ts)) throw new RangeError(`timer timestamp must be finite, got ${ts}`);
    const key = Buffer.from(this.#scope.bytes);
    const sk = this.#storeKey(domain, ts, key);
    const id = sk.toString('latin1');
    if (this.#live.has(id)) return;
    this.#st.cache.set(this.store, sk, 1, sk.length + 64);
    this.#st.noteWrite();
    this.#push({ ts: Math.floor(ts), key, domain, id });
  }

  #cancel(domain: Domain, ts: number): void {
    const sk = this.#storeKey(domain, ts, this.#scope.bytes);
    const id = sk.toString('latin1');
    if (!this.#live.delete(id)) return;
    this.#st.cache.delete(this.store, sk);
    this.#st.noteWrite();
  }

  #push(p: Pending): void {
    this.#live.set(p.id, p);
    const h = this.#heaps[p.domain];
    h.push(p);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (h[parent]!.ts <= h[i]!.ts) break;
      [h[parent], h[i]] = [h[i]!, h[parent]!];
      i = parent;
    }
  }

  #pop(domain: Domain): Pending | undefined {
    const h = this.#heaps[domain];
    if (h.length === 0) return undefined;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && h[l]!.ts < h[m]!.ts) m = l;
        if (r < h.length && h[r]!.ts < h[m]!.ts) m = r;
        if (m === i) break;
        [h[m], h[i]] = [h[i]!, h[m]!];
        i = m;
      }
    }
    return top;
  }

  /**
   * Fires every timer of `domain` due at `upTo` (inclusive), in time order, each through `guard`
   * (which handles what its `onTimer` throws, so the other due timers still fire). Returns how many.
   */
  fire(domain: Domain, upTo: number, guard?: TimerGuard): number {
    const h = this.#heaps[domain];
    let n = 0;
    while (h.length > 0 && h[0]!.ts <= upTo) {
      const p = this.#pop(domain)!;
      if (this.#live.get(p.id) !== p) continue; // cancelled or re-registered
      this.#live.delete(p.id);
      this.#st.cache.delete(this.store, Buffer.from(p.id, 'latin1'));
      this.#st.noteWrite();
      if (guard) guard(() => this.onFire(p.ts, p.key, domain), p);
      else this.onFire(p.ts, p.key, domain);
      n++;
    }
    return n;
  }
}
