/**
 * Marks one of Sluice's own aggregating processors as emitting through the task's record cache
 * (record-cache.ts): `key` holds one update per key, `window` one per key and window.
 */
export const RECORD_CACHE: unique symbol = Symbol('sluice.recordCache');
export type RecordCacheMode = 'key' | 'window';

export function cached<P extends object>(p: P, mode: RecordCacheMode | undefined): P {
  if (mode !== undefined) Object.defineProperty(p, RECORD_CACHE, { value: mode });
  return p;
}
