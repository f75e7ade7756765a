import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import type { Consumer } from 'kafkajs';
import { DLQ_HEADERS } from '../../src/runtime/dead-letter.js';
import { INVALID_UTF8, type Rng, WRONG_JSON_TYPES } from './fuzz.js';
import { readAll, testKafka, uniqueName } from './kafka.js';

const require = createRequire(import.meta.url);
const { CompressionTypes } = require('kafkajs') as typeof import('kafkajs');

/** What the dlq fixture must do with a record. */
export type Fate = 'out' | 'skip' | 'dlq-deserialize' | 'dlq-operator';

export interface FuzzRecord {
  partition: number;
  key: Buffer | null;
  value: Buffer | null;
  timestamp: string;
  fate: Fate;
  /** For `out`: the seq that must appear in the output once. */
  seq?: number;
}

/**
 * A seeded mix of good and poison records for the dlq fixture: good ones (some huge), ones the
 * skipper drops, undecodable ones (random bytes, invalid UTF-8 in key or value, cut JSON, huge
 * garbage) and ones of the wrong JSON type (including a null value).
 */
export function fuzzRecords(r: Rng, n: number, partitions: number, hugeBytes: number): FuzzRecord[] {
  const out: FuzzRecord[] = [];
  const t0 = Date.now() - 60_000;
  for (let i = 0; i < n; i++) {
    const partition = r.int(partitions);
    const timestamp = String(t0 + i);
    const key = Buffer.from(`k${r.int(13)}`);
    const roll = r.next();
    const good = (extra: object = {}): FuzzRecord => ({
      partition,
      key,
      value: Buffer.from(JSON.stringify({ k: key.toString(), seq: i, ...extra })),
      timestamp,
      fate: 'out',
      seq: i,
    });
    if (roll < 0.55) out.push(good());
    else if (roll < 0.58) out.push(good({ pad: 'x'.repeat(hugeBytes) }));
    else if (roll < 0.66)
      out.push({
        partition,
        key,
        value: Buffer.from(JSON.stringify({ seq: i, skipMe: true })),
        timestamp,
        fate: 'skip',
      });
    else if (roll < 0.72)
      out.push({
        partition,
        key,
        value: Buffer.concat([Buffer.from([0xff]), r.bytes(r.int(200))]),
        timestamp,
        fate: 'dlq-deserialize',
      });
    else if (roll < 0.77)
      out.push({
        partition,
        key: Buffer.concat([Buffer.from('k'), r.pick(INVALID_UTF8)]),
        value: Buffer.from(JSON.stringify({ seq: i })),
        timestamp,
        fate: 'dlq-deserialize',
      });
    else if (roll < 0.83) {
      const s = JSON.stringify({ k: 'cut', seq: i, more: [1, 2, 3] });
      out.push({
        partition,
        key,
        value: Buffer.from(s.slice(0, 1 + r.int(s.length - 2))),
        timestamp,
        fate: 'dlq-deserialize',
      });
    } else if (roll < 0.85)
      out.push({
        partition,
        key,
        value: Buffer.from(`{"huge":"${'y'.repeat(hugeBytes)}`),
        timestamp,
        fate: 'dlq-deserialize',
      });
    else if (roll < 0.97)
      out.push({
        partition,
        key,
        value: Buffer.from(r.pick(WRONG_JSON_TYPES)),
        timestamp,
        fate: 'dlq-operator',
      });
    else out.push({ partition, key, value: null, timestamp, fate: 'dlq-operator' });
  }
  return out;
}

/** Produces in order, in sends small enough for the broker's 1 MB batch limit. */
export async function produceRaw(topic: string, records: FuzzRecord[]): Promise<void> {
  const p = testKafka().producer({ idempotent: true, maxInFlightRequests: 1 });
  await p.connect();
  try {
    let chunk: FuzzRecord[] = [];
    let bytes = 0;
    const flush = async () => {
      if (chunk.length === 0) return;
      await p.send({
        topic,
        acks: -1,
        compression: CompressionTypes.None,
        messages: chunk.map((m) => ({
          partition: m.partition,
          key: m.key,
          value: m.value,
          timestamp: m.timestamp,
        })),
      });
      chunk = [];
      bytes = 0;
    };
    for (const m of records) {
      const size = (m.value?.length ?? 0) + (m.key?.length ?? 0) + 64;
      if (bytes + size > 700_000) await flush();
      chunk.push(m);
      bytes += size;
    }
    await flush();
  } finally {
    await p.disconnect();
  }
}

export interface RawRecord {
  partition: number;
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, string>;
}

/** Reads a whole topic with bytes intact (read_committed unless told), until `expected` arrived and it settled. */
export async function readRaw(
  topic: string,
  opts: { expected: number; timeoutMs?: number; settleMs?: number; readUncommitted?: boolean },
): Promise<RawRecord[]> {
  const { timeoutMs = 90_000, settleMs = 1500 } = opts;
  const c: Consumer = testKafka().consumer({
    groupId: uniqueName('raw-reader'),
    readUncommitted: opts.readUncommitted ?? false,
    maxWaitTimeInMs: 100,
    maxBytesPerPartition: 4 * 1024 * 1024,
  });
  const out: RawRecord[] = [];
  let last = Date.now();
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  await c.run({
    eachBatch: async ({ batch }) => {
      for (const m of batch.messages) {
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(m.headers ?? {})) headers[k] = String(v);
        out.push({ partition: batch.partition, offset: m.offset, key: m.key, value: m.value, headers });
      }
      last = Date.now();
    },
  });
  const start = Date.now();
  while (Date.now() - start < timeoutMs) {
    await new Promise((res) => setTimeout(res, 100));
    if (out.length >= opts.expected && Date.now() - last >= settleMs) break;
  }
  await c.disconnect();
  return out;
}

/**
 * Checks a run of the dlq fixture: every good record in the output exactly once, every poison
 * record in `<appId>-dlq` exactly once with its original bytes and the right headers, skipped
 * ones nowhere. Both topics are read read_committed: DLQ records are part of the task's transaction.
 */
export async function verifyDlqRun(
  id: string,
  input: string,
  output: string,
  records: FuzzRecord[],
  timeoutMs = 120_000,
) {
  // Offsets follow produce order within a partition (one idempotent producer, in order).
  const next = new Map<number, number>();
  const byPos = new Map<string, FuzzRecord>();
  for (const r of records) {
    const o = next.get(r.partition) ?? 0;
    next.set(r.partition, o + 1);
    byPos.set(`${r.partition}@${o}`, r);
  }
  const good = records.filter((r) => r.fate === 'out');
  const poison = records.filter((r) => r.fate.startsWith('dlq'));
  // A reader whose group rebalanced (a loaded machine) gets records again from its last
  // committed position: the same offset twice is the reader's, not the product's, so count each
  // position once. A duplicate written by the job has its own offset and is still caught.
  const out = uniqueBy(
    await readAll(output, { expected: good.length, timeoutMs }),
    (r) => `${r.partition}@${r.offset}`,
  );
  const at = new Map<number, string[]>();
  for (const r of out) {
    const seq = JSON.parse(r.value!).seq as number;
    at.set(seq, [...(at.get(seq) ?? []), `out ${r.partition}@${r.offset}`]);
  }
  const twice = [...at].filter(([, l]) => l.length > 1);
  if (twice.length > 0 || out.length !== good.length) {
    assert.fail(
      `output holds ${out.length} records for ${good.length} good ones; ${twice.length} seqs more than once ` +
        `(e.g. ${twice
          .slice(0, 5)
          .map(([s, l]) => `${s} → ${l.join(', ')}`)
          .join('; ')})`,
    );
  }
  const seqs = out.map((r) => JSON.parse(r.value!).seq as number).sort((a, b) => a - b);
  assert.deepEqual(
    seqs,
    good.map((r) => r.seq!).sort((a, b) => a - b),
    'every good record exactly once',
  );
  const dlq = uniqueBy(
    await readRaw(`${id}-dlq`, { expected: poison.length, timeoutMs }),
    (r) => `${r.partition}@${r.offset}`,
  );
  if (dlq.length !== poison.length) {
    // Say what is wrong: duplicates (where, and at which DLQ offsets), strays, or missing ones.
    const where = new Map<string, string[]>();
    for (const d of dlq) {
      const pos = `${d.headers[DLQ_HEADERS.partition]}@${d.headers[DLQ_HEADERS.offset]}`;
      where.set(pos, [...(where.get(pos) ?? []), `dlq ${d.partition}@${d.offset}`]);
    }
    const dups = [...where].filter(([, l]) => l.length > 1);
    const missing =
      poison.length - [...where.keys()].filter((p) => byPos.get(p)?.fate.startsWith('dlq')).length;
    assert.fail(
      `DLQ holds ${dlq.length} records for ${poison.length} poison ones: ${dups.length} duplicated ` +
        `(e.g. ${dups
          .slice(0, 5)
          .map(([p, l]) => `${p} → ${l.join(', ')}`)
          .join('; ')}), ${missing} missing`,
    );
  }
  const seen = new Set<string>();
  for (const d of dlq) {
    const pos = `${d.headers[DLQ_HEADERS.partition]}@${d.headers[DLQ_HEADERS.offset]}`;
    assert.ok(!seen.has(pos), `DLQ holds ${pos} twice`);
    seen.add(pos);
    const src = byPos.get(pos);
    assert.ok(src, `DLQ record ${pos} matches no input record`);
    assert.ok(src.fate.startsWith('dlq'), `${pos} (${src.fate}) should not be in the DLQ`);
    assert.equal(d.headers[DLQ_HEADERS.topic], input);
    assert.equal(d.headers[DLQ_HEADERS.timestamp], src.timestamp);
    assert.equal(
      d.value === null ? null : Buffer.compare(d.value, src.value!),
      src.value === null ? null : 0,
      `${pos}: original value bytes`,
    );
    assert.equal(Buffer.compare(d.key!, src.key!), 0, `${pos}: original key bytes`);
    if (src.fate === 'dlq-deserialize') {
      assert.equal(d.headers[DLQ_HEADERS.errorClass], 'SerdeError', pos);
      assert.equal(d.headers[DLQ_HEADERS.errorKind], 'deserialize', pos);
      assert.equal(d.headers[DLQ_HEADERS.operator], undefined, pos);
    } else {
      assert.equal(d.headers[DLQ_HEADERS.errorClass], 'TypeError', pos);
      assert.equal(d.headers[DLQ_HEADERS.errorKind], 'operator', pos);
      assert.equal(d.headers[DLQ_HEADERS.operator], 'validate', pos);
      assert.match(d.headers[DLQ_HEADERS.errorMessage]!, /^seq must be a number/);
    }
  }
  return { good: good.length, poison: poison.length, skipped: records.length - good.length - poison.length };
}

function uniqueBy<T>(xs: T[], key: (x: T) => string): T[] {
  const seen = new Set<string>();
  return xs.filter((x) => {
    const k = key(x);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
