/**
 * The RocksDB writer thread (see rocks-writer.ts): takes packed batches for databases the main
 * thread opened, by their native handle, and writes each as one RocksDB WriteBatch. The main
 * thread keeps a database open until every batch it sent for it is answered.
 */
import { createRequire } from 'node:module';
import { parentPort } from 'node:worker_threads';
import type { ColumnHandle } from './rocks-binding.js';
import { unpack, type WriteRequest, type WriteResult } from './rocks-writer-format.js';

interface Binding {
  db_init(handle: bigint): unknown;
  db_open(db: unknown, options: object, callback: () => void): Record<string, ColumnHandle>;
  batch_init(): unknown;
  batch_put(batch: unknown, key: Buffer, value: Buffer, options: { column: ColumnHandle }): void;
  batch_del(batch: unknown, key: Buffer, options: { column: ColumnHandle }): void;
  batch_write(db: unknown, batch: unknown, options: { sync: boolean }): void;
  batch_clear(batch: unknown): void;
}

const binding = createRequire(import.meta.url)('@nxtedition/rocksdb/binding') as Binding;
const noop = () => {};

function write(req: WriteRequest): void {
  // Looked up for every batch: the thread keeps nothing of a database between batches.
  const db = binding.db_init(req.handle);
  // On an open database the binding only returns its column families.
  const columns = binding.db_open(db, {}, noop);
  const options = req.stores.map((s) => {
    const column = columns[s];
    if (column === undefined) throw new Error(`unknown column family ${s}`);
    return { column };
  });
  const batch = binding.batch_init();
  try {
    unpack(Buffer.from(req.buf), (store, key, value) => {
      if (value === null) binding.batch_del(batch, key, options[store]!);
      else binding.batch_put(batch, key, value, options[store]!);
    });
    binding.batch_write(db, batch, { sync: false });
  } finally {
    binding.batch_clear(batch);
  }
}

parentPort!.postMessage('ready');
parentPort!.on('message', (req: WriteRequest) => {
  let res: WriteResult;
  try {
    write(req);
    res = { id: req.id };
  } catch (e) {
    const err = e as { message?: unknown; code?: unknown };
    res = {
      id: req.id,
      error: {
        message: String(err?.message ?? e),
        code: typeof err?.code === 'string' ? err.code : undefined,
      },
    };
  }
  parentPort!.postMessage(res);
});
