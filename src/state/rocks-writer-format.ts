/**
 * How a batch travels to the RocksDB writer thread: one transferred buffer of ops, each an 11-byte
 * header (kind: 0 put, 1 delete; the store's index in the request's `stores`; key and value
 * lengths) and its key and value bytes.
 */

/**
 * Ops as the write-behind keeps them: parallel arrays of store, key and value, keys and values
 * as latin1 strings (one char per byte), a `null` value a delete.
 */
export interface LatinOps {
  stores: string[];
  keys: string[];
  values: Array<string | null>;
}

export interface WriteRequest {
  id: number;
  /** The database's native handle (the binding's `db.handle`). */
  handle: bigint;
  stores: string[];
  buf: ArrayBuffer;
}

export interface WriteResult {
  id: number;
  error?: { message: string; code?: string };
}

const HEADER = 11;

/** Packs `ops` into a buffer of its own (transferable), and the store names it indexes. */
export function pack(ops: LatinOps): { stores: string[]; buf: ArrayBuffer } {
  const index = new Map<string, number>();
  const stores: string[] = [];
  let size = 0;
  for (let i = 0; i < ops.keys.length; i++)
    size += HEADER + ops.keys[i]!.length + (ops.values[i]?.length ?? 0);
  const buf = Buffer.allocUnsafeSlow(size);
  let at = 0;
  for (let i = 0; i < ops.keys.length; i++) {
    const store = ops.stores[i]!;
    let s = index.get(store);
    if (s === undefined) {
      index.set(store, (s = stores.length));
      stores.push(store);
    }
    const k = ops.keys[i]!;
    const v = ops.values[i]!;
    buf[at] = v === null ? 1 : 0;
    buf.writeUInt16LE(s, at + 1);
    buf.writeUInt32LE(k.length, at + 3);
    buf.writeUInt32LE(v === null ? 0 : v.length, at + 7);
    at += HEADER;
    at += buf.write(k, at, 'latin1');
    if (v !== null) at += buf.write(v, at, 'latin1');
  }
  return { stores, buf: buf.buffer as ArrayBuffer };
}

/** Calls `op` for each op of a packed buffer, with views of its bytes (no copy). */
export function unpack(buf: Buffer, op: (store: number, key: Buffer, value: Buffer | null) => void): void {
  let at = 0;
  while (at < buf.length) {
    const del = buf[at] === 1;
    const store = buf.readUInt16LE(at + 1);
    const kl = buf.readUInt32LE(at + 3);
    const vl = buf.readUInt32LE(at + 7);
    at += HEADER;
    const key = buf.subarray(at, at + kl);
    at += kl;
    const value = del ? null : buf.subarray(at, at + vl);
    at += del ? 0 : vl;
    op(store, key, value);
  }
}
