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

/** One thread and the batches it was sent: only its own answers or its exit settle them. */
interface Thread {
  worker: Worker;
  waiting: Map<number, Waiting>;
  /** It loaded the binding (its first message). */
  ready: boolean;
}

let current: Thread | undefined;
let nextId = 1;
/** Why the thread could not start (the binding failed to load in it): writes stay on the caller's thread. */
let broken: Error | undefined;

let script = new URL('./rocks-writer-thread.js', import.meta.url);

/** Tests: the threads started from now on run `url` instead. */
export function useWriterScript(url: URL): void {
  script = url;
}

function start(): Thread {
  const t: Thread = {
    worker: new Worker(script, { name: 'sluice-rocks-writer' }),
    waiting: new Map(),
    ready: false,
  };
  t.worker.on('message', (res: WriteResult | 'ready') => {
    if (res === 'ready') t.ready = true;
    else {
      const d = t.waiting.get(res.id);
      t.waiting.delete(res.id);
      if (res.error) d?.reject(new RocksWriteError(res.error.message, res.error.code));
      else d?.resolve();
    }
    if (t.waiting.size === 0) t.worker.unref();
  });
  t.worker.on('error', (err) => {
    // Retired: the next batch goes to a new thread. Its own batches settle at its exit, when
    // it surely writes no more.
    if (current === t) current = undefined;
    if (!t.ready) broken = err;
  });
  t.worker.on('exit', (code) => {
    if (current === t) current = undefined;
    const err = new Error(`the RocksDB writer thread exited (code ${code})`);
    for (const d of t.waiting.values()) d.reject(err);
    t.waiting.clear();
  });
  return t;
}

/** False once the thread failed to start: write on the calling thread instead. */
export function writerUsable(): boolean {
  return broken === undefined;
}

/**
 * Writes `ops` to the database of `handle` as one atomic batch on the writer thread. Batches are
 * written in the order they are sent. Empty `ops` settle at once.
 */
export function writeOffThread(handle: bigint, ops: LatinOps): Promise<void> {
  if (ops.keys.length === 0) return Promise.resolve();
  const { stores, buf } = pack(ops);
  current ??= start();
  const t = current;
  const id = nextId++;
  const done = new Promise<void>((resolve, reject) => t.waiting.set(id, { resolve, reject }));
  t.worker.ref();
  const req: WriteRequest = { id, handle, stores, buf };
  t.worker.postMessage(req, [buf]);
  return done;
}
