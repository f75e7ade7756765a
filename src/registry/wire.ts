import { SerdeError } from '../errors.js';

/**
 * The Confluent wire format, shared by every Schema Registry client: a magic byte 0, the schema id
 * as 4 bytes big-endian, then (Protobuf only) the message indexes, then the encoded payload.
 *
 * Protobuf's message indexes name the message type within its schema file: the path of indexes
 * from the file's top-level message types down through nested ones, written as a zig-zag varint
 * count followed by zig-zag varint indexes; the common `[0]` (the first top-level message) is
 * written as the single byte 0.
 */
export const MAGIC_BYTE = 0;
export const HEADER_BYTES = 5;

/** The schema id of framed bytes, or a SerdeError naming what is wrong with them. */
export function schemaIdOf(bytes: Buffer): number {
  if (bytes.length < HEADER_BYTES)
    throw new SerdeError(
      `not in the Schema Registry wire format: ${bytes.length} byte${bytes.length === 1 ? '' : 's'}, ` +
        `fewer than the ${HEADER_BYTES}-byte header`,
    );
  if (bytes[0] !== MAGIC_BYTE)
    throw new SerdeError(
      `not in the Schema Registry wire format: first byte 0x${bytes[0]!.toString(16).padStart(2, '0')}, ` +
        'not the magic byte 0x00',
    );
  return bytes.readUInt32BE(1);
}

/**
 * The schema id of framed bytes, or undefined when they are not framed (no magic byte, too
 * short): for the pre-batch scan, which leaves the error to deserialization.
 */
export function peekSchemaId(bytes: Buffer | null): number | undefined {
  if (bytes === null || bytes.length < HEADER_BYTES || bytes[0] !== MAGIC_BYTE) return undefined;
  return bytes.readUInt32BE(1);
}

/** Header + optional Protobuf message indexes + payload. */
export function frame(id: number, payload: Uint8Array, messageIndexes?: readonly number[]): Buffer {
  if (!Number.isInteger(id) || id < 0 || id > 0xffffffff) throw new RangeError(`bad schema id ${id}`);
  const idx = messageIndexes === undefined ? undefined : encodeMessageIndexes(messageIndexes);
  const out = Buffer.allocUnsafe(HEADER_BYTES + (idx?.length ?? 0) + payload.length);
  out[0] = MAGIC_BYTE;
  out.writeUInt32BE(id, 1);
  let at = HEADER_BYTES;
  if (idx) {
    out.set(idx, at);
    at += idx.length;
  }
  out.set(payload, at);
  return out;
}

/** The message-index array as Confluent writes it (`[0]` → one 0 byte). */
export function encodeMessageIndexes(indexes: readonly number[]): Buffer {
  if (indexes.length === 1 && indexes[0] === 0) return Buffer.from([0]);
  const parts: number[] = [];
  writeZigZag(parts, indexes.length);
  for (const i of indexes) {
    if (!Number.isInteger(i) || i < 0) throw new RangeError(`bad message index ${i}`);
    writeZigZag(parts, i);
  }
  return Buffer.from(parts);
}

/**
 * Reads the message indexes that follow the header; returns them and where the payload starts.
 * A count of 0 means `[0]`.
 */
export function readMessageIndexes(bytes: Buffer, at = HEADER_BYTES): { indexes: number[]; next: number } {
  const pos = { at };
  const count = readZigZag(bytes, pos);
  if (count === 0) return { indexes: [0], next: pos.at };
  if (count < 0 || count > 100)
    throw new SerdeError(`bad Protobuf message-index count ${count} (corrupt or not Protobuf)`);
  const indexes: number[] = [];
  for (let i = 0; i < count; i++) {
    const v = readZigZag(bytes, pos);
    if (v < 0) throw new SerdeError(`bad Protobuf message index ${v}`);
    indexes.push(v);
  }
  return { indexes, next: pos.at };
}

function writeZigZag(out: number[], n: number): void {
  // Indexes are small: 32-bit zig-zag is plenty.
  let v = ((n << 1) ^ (n >> 31)) >>> 0;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
}

function readZigZag(bytes: Buffer, pos: { at: number }): number {
  let v = 0;
  let shift = 0;
  for (;;) {
    if (pos.at >= bytes.length) throw new SerdeError('truncated Protobuf message indexes');
    const b = bytes[pos.at++]!;
    v |= (b & 0x7f) << shift;
    if ((b & 0x80) === 0) break;
    shift += 7;
    if (shift > 28) throw new SerdeError('Protobuf message-index varint too long');
  }
  v >>>= 0;
  return (v >>> 1) ^ -(v & 1);
}
