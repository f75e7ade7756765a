import type { Timers } from '../api/context.js';
import { decodeTimerKey, encodeTimerKey } from '../state/key-codec.js';
import type { KeyedState, TimerGuard } from './task-state.js';

type Domain = 'event' | 'processing';

/**
 * Timers of one domain of one operator kept in memory: the earliest ones (all up to the horizon)
 * and the ones registered past the horizon that RocksDB may not hold yet. 1024: a refill is one
 * RocksDB range read per 1024 timers fired; memory is bounded by twice that per domain (plus the
 * registrations past the horizon since the last checkpoint, which the cache holds dirty anyway).
 */
export const TIMER_WINDOW = 1024;

interface Pending {
  ts: number;
  key: Buffer;
  domain: Domain;
  /** The store key (domain byte + timer key), as latin1: sorts like the bytes. */
  id: string;
  /** Registration number (0: read from RocksDB), to forget what a checkpoint committed. */
  seq: number;
}

/** One domain's timers in memory. */
interface Window {
  readonly domain: Domain;
  /** The domain's byte, as the store key's first byte. */
  readonly byte: number;
  /** Min-heap by id: every live timer with id ≤ `horizon`. */
  heap: Pending[];
  /** Min-heap by id: timers registered with id > `horizon` since they were last committed. */
  beyond: Pending[];
  /** The greatest id loaded (latin1); `null`: no timer of the domain lies past what is in memory. */
  horizon: string | null;
}

const before = (a: Pending, b: Pending) => a.id < b.id;

function push(h: Pending[], p: Pending): void {
  h.push(p);
  let i = h.length - 1;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (!before(h[i]!, h[parent]!)) break;
    [h[parent], h[i]] = [h[i]!, h[parent]!];
    i = parent;
  }
}

function pop(h: Pending[]): Pending | undefined {
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
      if (l < h.length && before(h[l]!, h[m]!)) m = l;
      if (r < h.length && before(h[r]!, h[m]!)) m = r;
      if (m === i) break;
      [h[m], h[i]] = [h[i]!, h[m]!];
      i = m;
    }
  }
  return top;
}

const byId = (a: Pending, b: Pending) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * The timers of one process operator in one task. Stored in the operator's timer store (a
 * changelogged column family), keyed by (domain, timestamp, key) so that RocksDB's order is firing
 * order. Only a window of the earliest timers is in memory (at most {@link TIMER_WINDOW} read at
 * a time): the task's start reads the first window of each domain (one bounded range read, not a
 * scan of the store), and firing reads the next window when the loaded ones are gone. Firing
 * deletes the timer in the same checkpoint as the outputs it caused: a crash neither loses nor
 * repeats a timer's effects.
 */
export class TimerService {
  readonly store: string;
  readonly #st: KeyedState;
  readonly #scope: { bytes: Buffer };
  /** The timers in memory (both heaps of both domains), by id; what a heap holds besides is stale. */
  readonly #live = new Map<string, Pending>();
  readonly #w: Record<Domain, Window>;
  #seq = 0;
  /** `#seq` when the pending checkpoint took its snapshot. */
  #snap = 0;
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
    const start = (domain: Domain, byte: number): Window => ({
      domain,
      byte,
      heap: [],
      beyond: [],
      horizon: String.fromCharCode(byte),
    });
    this.#w = { event: start('event', 0), processing: start('processing', 1) };
    // The first window of each domain, from what RocksDB holds (already restored from the changelog).
    this.#refill(this.#w.event);
    this.#refill(this.#w.processing);
  }

  /** Timers held in memory (at most about 2 × {@link TIMER_WINDOW} per domain, plus recent registrations). */
  get inMemory(): number {
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
    const w = this.#w[domain];
    const inWindow = w.horizon === null || id <= w.horizon;
    // In the window every live timer is in memory, so this one is new; past it, RocksDB may have it.
    if (!inWindow && this.#st.cache.get(this.store, sk) !== undefined) return;
    this.#st.cache.set(this.store, sk, 1, sk.length + 64);
    this.#st.noteWrite();
    const p: Pending = { ts: Math.floor(ts), key, domain, id, seq: ++this.#seq };
    this.#live.set(id, p);
    if (inWindow) {
      push(w.heap, p);
      if (w.heap.length > 2 * TIMER_WINDOW) this.#shrink(w);
    } else {
      push(w.beyond, p);
    }
  }

  #cancel(domain: Domain, ts: number): void {
    const sk = this.#storeKey(domain, ts, this.#scope.bytes);
    const id = sk.toString('latin1');
    if (this.#live.delete(id)) {
      this.#st.cache.delete(this.store, sk);
      this.#st.noteWrite();
      return;
    }
    const w = this.#w[domain];
    if (w.horizon === null || id <= w.horizon) return; // not live: in the window, all live ones are in memory
    if (this.#st.cache.get(this.store, sk) === undefined) return;
    this.#st.cache.delete(this.store, sk);
    this.#st.noteWrite();
  }

  /**
   * Reads the next window past the horizon: up to {@link TIMER_WINDOW} timers from RocksDB (less
   * those deleted since the last checkpoint), with the registrations past the horizon that sort
   * before the last one read.
   */
  #refill(w: Window): void {
    if (w.horizon === null) return;
    const from = Buffer.from(w.horizon, 'latin1');
    const rows = this.#st.rocks.scanSync(this.store, {
      gt: from,
      lt: Buffer.of(w.byte + 1),
      limit: TIMER_WINDOW,
    });
    const horizon = rows.length === TIMER_WINDOW ? rows[rows.length - 1]![0].toString('latin1') : null;
    for (const [k] of rows) {
      const id = k.toString('latin1');
      if (this.#live.has(id)) continue; // registered past the horizon: in `beyond`
      const cached = this.#st.cache.peek(this.store, k);
      if (cached !== undefined && cached.value === undefined) continue; // deleted, not yet committed
      const { ts, key } = decodeTimerKey(k.subarray(1));
      const p: Pending = { ts, key: Buffer.from(key), domain: w.domain, id, seq: 0 };
      this.#live.set(id, p);
      push(w.heap, p);
    }
    while (w.beyond.length > 0 && (horizon === null || w.beyond[0]!.id <= horizon)) {
      const p = pop(w.beyond)!;
      if (this.#live.get(p.id) === p) push(w.heap, p);
    }
    w.horizon = horizon;
    if (w.heap.length > 2 * TIMER_WINDOW) this.#shrink(w);
  }

  /** Keeps the earliest {@link TIMER_WINDOW} in the window; the rest wait past the new horizon. */
  #shrink(w: Window): void {
    const live = w.heap.filter((p) => this.#live.get(p.id) === p).sort(byId);
    if (live.length <= 2 * TIMER_WINDOW) {
      w.heap = live; // a sorted array is a heap
      return;
    }
    w.heap = live.slice(0, TIMER_WINDOW);
    w.horizon = w.heap[TIMER_WINDOW - 1]!.id;
    for (let i = TIMER_WINDOW; i < live.length; i++) push(w.beyond, live[i]!);
  }

  /** The pending checkpoint took its snapshot of the cache's dirty entries. */
  snapshot(): void {
    this.#snap = this.#seq;
  }

  /**
   * The snapshot's checkpoint committed: the registrations past the horizon that it wrote are in
   * RocksDB now, where the next refill finds them, and leave memory.
   */
  committed(): void {
    for (const w of [this.#w.event, this.#w.processing]) {
      if (w.beyond.length === 0) continue;
      const keep: Pending[] = [];
      for (const p of w.beyond) {
        if (this.#live.get(p.id) !== p) continue;
        if (p.seq > this.#snap) keep.push(p);
        else this.#live.delete(p.id);
      }
      w.beyond = keep.sort(byId);
    }
  }

  /**
   * Fires every timer of `domain` due at `upTo` (inclusive), in time order, each through `guard`
   * (which handles what its `onTimer` throws, so the other due timers still fire). Returns how many.
   */
  fire(domain: Domain, upTo: number, guard?: TimerGuard): number {
    const w = this.#w[domain];
    let n = 0;
    for (;;) {
      while (w.heap.length === 0 && w.horizon !== null) this.#refill(w);
      const top = w.heap[0];
      if (top === undefined || top.ts > upTo) break;
      pop(w.heap);
      if (this.#live.get(top.id) !== top) continue; // cancelled or re-registered
      this.#live.delete(top.id);
      this.#st.cache.delete(this.store, Buffer.from(top.id, 'latin1'));
      this.#st.noteWrite();
      if (guard) guard(() => this.onFire(top.ts, top.key, domain), top);
      else this.onFire(top.ts, top.key, domain);
      n++;
    }
    return n;
  }
}
