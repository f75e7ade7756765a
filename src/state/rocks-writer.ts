/**
 * One thread per process that writes RocksDB batches for the main thread. The binding writes
 * synchronously, and a keyed worker whose keys are mostly new (a count over a million keys) spent
 * 12–13 % of its busy main-thread CPU in `batch._writeSync` (bench/profile.ts); on this thread it
 * overlaps the processing. The thread reaches a database the main thread opened by its native
 * handle (RocksDB is safe for concurrent readers and writers); the main thread keeps it open
 * until every batch sent for it is answered ({@link RocksStore.close}).
 */
import { Worker } from 'node:worker_threads';
import { type LatinOps, pack, type WriteRequest, type WriteResult } from './rocks-writer-format.js';

/** An error the writer thread met, with the binding's code (`LEVEL_CORRUPTION`, `LEVEL_IO_ERROR`). */
export class RocksWriteError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
    this.name = 'RocksWriteError';
  }
}

interface Waiting {
  resolve(): void;
  reject(e: unknown): void;
}

let worker: Worker | undefined;
let nextId = 1;
const waiting = new Map<number, Waiting>();

function start(): Worker {
  const w = new Worker(new URL('./rocks-writer-thread.js', import.meta.url), { name: 'sluice-rocks-writer' });
  w.on('message', (res: WriteResult) => {
    const d = waiting.get(res.id);
    if (d === undefined) return;
    waiting.delete(res.id);
    if (res.error) d.reject(new RocksWriteError(res.error.message, res.error.code));
    else d.resolve();
    if (waiting.size === 0) w.unref();
  });
  const gone = (err: Error) => {
    if (worker === w) worker = undefined;
    for (const d of waiting.values()) d.reject(err);
    waiting.clear();
  };
  w.on('error', gone);
  w.on('exit', (code) => gone(new Error(`the RocksDB writer thread exited (code ${code})`)));
  return w;
}

/**
 * Writes `ops` to the database of `handle` as one atomic batch on the writer thread. Batches are
 * written in the order they are sent. Empty `ops` settle at once.
 */
export function writeOffThread(handle: bigint, ops: LatinOps): Promise<void> {
  if (ops.keys.length === 0) return Promise.resolve();
  const { stores, buf } = pack(ops);
  worker ??= start();
  const id = nextId++;
  const done = new Promise<void>((resolve, reject) => waiting.set(id, { resolve, reject }));
  worker.ref();
  const req: WriteRequest = { id, handle, stores, buf };
  worker.postMessage(req, [buf]);
  return done;
}
