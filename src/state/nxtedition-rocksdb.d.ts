/**
 * The package ships no types. Only `rocks-binding.ts` imports it, and it types what it uses there
 * (RocksDB may be imported under `src/state/` only).
 */
declare module '@nxtedition/rocksdb' {
  export const RocksLevel: new (
    location: string,
    options: { keyEncoding: 'buffer'; valueEncoding: 'buffer' },
  ) => unknown;
}
