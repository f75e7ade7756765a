/**
 * Replaces kafkajs 2.2.4's RecordBatch v2 decoder (`protocol/recordBatch/v0/decoder.js`, which
 * every Fetch response v4–v11 uses) for uncompressed batches, and the offset filter of its
 * consumer `Batch`. kafkajs decodes each record in a `Decoder` of its own, reads every varlong
 * through 64-bit `Long` objects (one per byte), parses the batch's first offset and first
 * timestamp from their strings again for every record to add the deltas, folds the headers by
 * spreading a new object per header, and its `Batch` parses every record's offset string into a
 * `Long` once more to compare it with the fetched offset. In the keyed running sum under
 * exactly-once the fetch decoding was about 8 % of a worker's busy CPU (bench/cpu.ts).
 *
 * This decoder reads the batch in place and adds the deltas as numbers (base + delta is checked
 * to stay within 2^53), and gives the same records as kafkajs's: the same fields in the same
 * order, offsets and timestamps as decimal strings, keys, values and header values as views of
 * the fetched bytes, one shared batch context (test/unit/kafka/fetch-decoder.test.ts decodes the
 * same bytes with both). Anything else goes to kafkajs's own decoder, untouched: compressed
 * batches (which also covers kafkajs's partial-batch error), a magic byte other than 2, a batch
 * that does not end where its length says, numbers beyond 2^53, odd lengths, a header named
 * `__proto__`.
 *
 * Installed before kafkajs loads its fetch responses and consumer (kafkajs-preload.ts), after
 * the read_committed filter (aborted-filter.ts), which the `Batch` here keeps using.
 */
import { createRequire } from 'node:module';
import { abortedFilterInstalled, filterAbortedMessages } from './aborted-filter.js';

const require = createRequire(import.meta.url);

interface KafkajsDecoder {
  buffer: Buffer;
  offset: number;
}
interface BatchContext {
  firstOffset: string;
  firstTimestamp: string;
  partitionLeaderEpoch: number;
  inTransaction: boolean;
  isControlBatch: boolean;
  lastOffsetDelta: number;
  producerId: string;
  producerEpoch: number;
  firstSequence: number;
  maxTimestamp: string;
  timestampType: number;
  magicByte?: number;
}
export interface DecodedRecord {
  magicByte: number;
  attributes: number;
  timestamp: string;
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, Buffer | null | Array<Buffer | null>>;
  isControlRecord: boolean;
  batchContext: BatchContext;
}
export type DecodedBatch = BatchContext & { records: DecodedRecord[] };

const TIMESTAMP_TYPE_FLAG = 0x8;
const TRANSACTIONAL_FLAG = 0x10;
const CONTROL_FLAG = 0x20;
const COMPRESSION_MASK = 0x7;
const CREATE_TIME = 0;
const LOG_APPEND_TIME = 1;
/** Bytes of a batch before its records: first offset … record count. */
const HEADER = 61;
const TWO_53 = 2 ** 53;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
/** The largest int32 offset delta, so that base + any delta stays safe. */
const INT32 = 2 ** 31;

/** Thrown inside the decoder for anything it leaves to kafkajs; never escapes it. */
const FALLBACK = Symbol('fallback to kafkajs');

class Reader {
  constructor(
    readonly b: Buffer,
    public o: number,
    readonly end: number,
  ) {}
  /** Zigzag varint, 32-bit, as kafkajs reads it. */
  varInt(): number {
    const b = this.b;
    let z = 0;
    let shift = 0;
    let byte: number;
    do {
      if (this.o >= this.end || shift > 28) throw FALLBACK;
      byte = b[this.o++]!;
      z |= (byte & 0x7f) << shift;
      shift += 7;
    } while (byte >= 0x80);
    return (z >>> 1) ^ -(z & 1);
  }
  /** Zigzag varlong as a number; anything whose magnitude reaches 2^52 is left to kafkajs. */
  varLong(): number {
    const b = this.b;
    let z = 0;
    let mul = 1;
    let byte: number;
    do {
      if (this.o >= this.end || mul > 2 ** 49) throw FALLBACK;
      byte = b[this.o++]!;
      z += (byte & 0x7f) * mul;
      mul *= 128;
    } while (byte >= 0x80);
    if (z >= TWO_53) throw FALLBACK;
    return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
  }
  /** Varint-length bytes; -1 is null. */
  bytes(): Buffer | null {
    const len = this.varInt();
    if (len === -1) return null;
    if (len < -1 || this.o + len > this.end) throw FALLBACK;
    const v = this.b.subarray(this.o, this.o + len);
    this.o += len;
    return v;
  }
}

function safeNumber(v: bigint, margin: number): number {
  if (v > MAX_SAFE - BigInt(margin) || v < -MAX_SAFE + BigInt(margin)) throw FALLBACK;
  return Number(v);
}

type Headers = DecodedRecord['headers'];

function readHeaders(r: Reader): Headers {
  const n = r.varInt();
  const headers: Headers = {};
  if (n === -1) return headers;
  if (n < -1) throw FALLBACK;
  for (let i = 0; i < n; i++) {
    const keyLen = r.varInt();
    if (keyLen < 0 || r.o + keyLen > r.end) throw FALLBACK;
    const key = r.b.toString('utf8', r.o, r.o + keyLen);
    r.o += keyLen;
    if (key === '__proto__') throw FALLBACK;
    const value = r.bytes();
    const had = headers[key];
    // kafkajs: a repeated key becomes an array of its values in order.
    if (had === undefined) headers[key] = value;
    else if (Array.isArray(had)) headers[key] = had.concat([value]);
    else headers[key] = [had, value];
  }
  return headers;
}

/**
 * Decodes the uncompressed RecordBatch that starts at `start` of `b`, as kafkajs would, and
 * says where it ends; undefined for anything left to kafkajs's decoder.
 */
export function decodeBatchAt(b: Buffer, start: number): { batch: DecodedBatch; end: number } | undefined {
  try {
    return decode(b, start);
  } catch (e) {
    if (e === FALLBACK) return undefined;
    throw e;
  }
}

function decode(b: Buffer, start: number): { batch: DecodedBatch; end: number } {
  if (start + HEADER > b.length) throw FALLBACK;
  const length = b.readInt32BE(start + 8);
  const end = start + 12 + length;
  if (length < HEADER - 12 || end > b.length) throw FALLBACK;
  const attributes = b.readInt16BE(start + 21);
  if ((attributes & COMPRESSION_MASK) !== 0) throw FALLBACK;
  const magicByte = b.readInt8(start + 16);
  // A legacy message set after a v2 batch in one response: kafkajs's own path, whatever it does.
  if (magicByte !== 2) throw FALLBACK;
  const firstOffsetBig = b.readBigInt64BE(start);
  const firstTimestampBig = b.readBigInt64BE(start + 27);
  const firstOffsetNum = safeNumber(firstOffsetBig, INT32);
  const firstTimestampNum = safeNumber(firstTimestampBig, 0);
  const isControlBatch = (attributes & CONTROL_FLAG) > 0;
  const timestampType = (attributes & TIMESTAMP_TYPE_FLAG) > 0 ? LOG_APPEND_TIME : CREATE_TIME;
  const maxTimestamp = b.readBigInt64BE(start + 35).toString();
  const context: BatchContext = {
    firstOffset: firstOffsetBig.toString(),
    firstTimestamp: firstTimestampBig.toString(),
    partitionLeaderEpoch: b.readInt32BE(start + 12),
    inTransaction: (attributes & TRANSACTIONAL_FLAG) > 0,
    isControlBatch,
    lastOffsetDelta: b.readInt32BE(start + 23),
    producerId: b.readBigInt64BE(start + 43).toString(),
    producerEpoch: b.readInt16BE(start + 51),
    firstSequence: b.readInt32BE(start + 53),
    maxTimestamp,
    timestampType,
  };
  const batchContext: BatchContext = { ...context, magicByte };
  const count = b.readInt32BE(start + 57);
  if (count < -1 || count > length) throw FALLBACK;
  const records: DecodedRecord[] = count === -1 ? [] : new Array(count);
  const r = new Reader(b, start + HEADER, end);
  const appendTime = timestampType === LOG_APPEND_TIME;
  for (let i = 0; i < count; i++) {
    const len = r.varInt();
    const recEnd = r.o + len;
    if (len < 1 || recEnd > end) throw FALLBACK;
    const rec = new Reader(b, r.o, recEnd);
    const recAttributes = b.readInt8(rec.o++);
    const tsDelta = rec.varLong();
    const offsetDelta = rec.varInt();
    const ts = firstTimestampNum + tsDelta;
    if (!Number.isSafeInteger(ts)) throw FALLBACK;
    const key = rec.bytes();
    const value = rec.bytes();
    const headers = readHeaders(rec);
    records[i] = {
      magicByte,
      attributes: recAttributes,
      timestamp: appendTime ? maxTimestamp : String(ts),
      offset: String(firstOffsetNum + offsetDelta),
      key,
      value,
      headers,
      isControlRecord: isControlBatch,
      batchContext,
    };
    // kafkajs reads each record from a slice of its length: what the fields leave is skipped.
    r.o = recEnd;
  }
  if (r.o !== end) throw FALLBACK;
  return { batch: { ...context, records }, end };
}

type Original = (d: KafkajsDecoder) => Promise<DecodedBatch>;

/** The decoder kafkajs's Fetch responses call, per batch of the fetched bytes. */
function patchDecoder(): { installed: boolean; original?: Original } {
  const target = require.resolve('kafkajs/src/protocol/recordBatch/v0/decoder.js');
  const user = require.resolve('kafkajs/src/protocol/requests/fetch/v4/decodeMessages.js');
  if (require.cache[user] !== undefined) {
    const exp = require.cache[target]?.exports as { sluicePatched?: boolean } | undefined;
    return { installed: exp?.sluicePatched === true };
  }
  const original = require(target) as Original;
  const mod = require.cache[target];
  if (mod === undefined) return { installed: false };
  const decoder = async (d: KafkajsDecoder): Promise<DecodedBatch> => {
    const got = decodeBatchAt(d.buffer, d.offset);
    if (got === undefined) return original(d);
    d.offset = got.end;
    return got.batch;
  };
  decoder.sluicePatched = true;
  decoder.original = original;
  mod.exports = decoder;
  return { installed: true, original };
}

interface Message {
  offset: string;
  isControlRecord?: boolean;
}
interface PartitionData {
  messages: Message[];
  abortedTransactions?: unknown;
}
type BatchClass = new (topic: string, fetchedOffset: string, p: PartitionData) => object;

/** The messages at or after the fetched offset, compared as numbers (exact while it is safe). */
export function withinOffset<M extends Message>(messages: M[], fetchedOffset: unknown): M[] {
  const fetched = BigInt(String(fetchedOffset));
  if (fetched > MAX_SAFE || fetched < -MAX_SAFE) return messages.filter((m) => BigInt(m.offset) >= fetched);
  const from = Number(fetched);
  // Offsets ascend within a fetch, so usually every message passes; check before copying.
  let i = 0;
  while (i < messages.length && Number(messages[i]!.offset) >= from) i++;
  if (i === messages.length) return messages.slice();
  return messages.filter((m) => Number(m.offset) >= from);
}

/**
 * kafkajs's consumer Batch with the same fields, the offset filter by numbers instead of a
 * `Long` parsed per message: built on an empty partition, then given the messages.
 */
function patchBatch(): boolean {
  const target = require.resolve('kafkajs/src/consumer/batch.js');
  const loaded = require.cache[target] !== undefined;
  if (loaded) return (require.cache[target]!.exports as { sluicePatched?: boolean }).sluicePatched === true;
  const Original = require(target) as BatchClass;
  const mod = require.cache[target]!;
  class Batch extends Original {
    static sluicePatched = true;
    declare rawMessages: Message[];
    declare messagesWithinOffset: Message[];
    declare messages: Message[];
    constructor(topic: string, fetchedOffset: string, partitionData: PartitionData) {
      super(topic, fetchedOffset, { ...partitionData, messages: [] });
      const messages = partitionData.messages;
      this.rawMessages = messages;
      this.messagesWithinOffset = withinOffset(messages, fetchedOffset);
      this.messages = filterAbortedMessages({
        messages: this.messagesWithinOffset as never,
        abortedTransactions: partitionData.abortedTransactions as never,
      }).filter((m) => !m.isControlRecord);
    }
  }
  mod.exports = Batch;
  return true;
}

const decoderPatch = patchDecoder();
/** True when kafkajs decodes fetched record batches with {@link decodeBatchAt}. */
export const fetchDecoderPatched: boolean = decoderPatch.installed;
/** True when kafkajs's consumer Batch filters by numbers and still with the fixed aborted filter. */
export const batchFilterPatched: boolean = abortedFilterInstalled && patchBatch();
