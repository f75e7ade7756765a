import type { Serde } from './serdes.js';

/**
 * The key of a record in a stream-stream join's buffer (a map state per record key): its event
 * time `t` and a tag unique among the records of that time (`<topic>:<partition>:<offset>:<n>`, n
 * counting the join inputs one input record gave). Serialized as `t` in 8 bytes big-endian with the sign bit flipped,
 * then the tag, so that the buffer's entries sort by time: a record's partners are a run of it and
 * pruning deletes a prefix.
 */
export interface JoinBufferKey {
  t: number;
  tag: string;
}

const TWO_32 = 2 ** 32;
const SIGN = 0x80000000;

export function joinBufferKeySerde(): Serde<JoinBufferKey> {
  return {
    name: 'sluice-join-key',
    fingerprint: 'sluice-join-key-v1',
    serialize: ({ t, tag }) => {
      if (!Number.isSafeInteger(t)) throw new RangeError(`join record time must be a safe integer, got ${t}`);
      const tb = Buffer.from(tag, 'utf8');
      const buf = Buffer.allocUnsafe(8 + tb.length);
      const hi = Math.floor(t / TWO_32);
      buf.writeUInt32BE((hi + SIGN) >>> 0, 0);
      buf.writeUInt32BE(t - hi * TWO_32, 4);
      tb.copy(buf, 8);
      return buf;
    },
    deserialize: (b) => {
      if (b === null || b.length < 8) throw new RangeError('join buffer key: too short');
      const t = (b.readUInt32BE(0) - SIGN) * TWO_32 + b.readUInt32BE(4);
      return { t, tag: b.toString('utf8', 8) };
    },
  };
}
