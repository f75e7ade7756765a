import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { readCommittedWithJava } from '../../bench/java-reader.js';
import { prng } from '../../examples/load-generator.js';
import { brokers, type ReadRecord, type TestRecord } from './kafka.js';
import { diagnoseGroup, dumpWorkerLogs, type WorkerProcess } from './workers.js';

/**
 * Input and expectations for the running-sum fixture job (test/fixtures/jobs/running-sum.ts),
 * shared by the crash, outage and soak checks: the job emits, per input record, the running sum
 * and count of its key, so under exactly-once the output of key k is exactly the prefix sums of
 * k's values in input order — nothing lost, nothing repeated.
 */

/** Deterministic pseudo-random numbers (mulberry32), so a failing run can be replayed. */
export const rng = prng;

export interface RunningSumOut {
  k: string;
  sum: number;
  n: number;
  seq: number;
}

/** Builds input records and the expected prefix sums per key, appending to `expected`. */
export class RunningSumInput {
  readonly expected = new Map<string, number[]>();
  #seq = 0;
  readonly #random: () => number;
  readonly #keys: number;

  readonly #pad: string;

  /** `keyPadding`: characters appended to every key (to make state big, e.g. to fill a disk). */
  constructor(opts: { seed: number; keys: number; keyPadding?: number }) {
    this.#random = rng(opts.seed);
    this.#keys = opts.keys;
    this.#pad = opts.keyPadding ? `-${'x'.repeat(opts.keyPadding)}` : '';
  }

  /** Records produced so far. */
  get count(): number {
    return this.#seq;
  }

  /** The next `n` input records (key = k, value = {k, v, seq}), recorded in the expectation. */
  next(n: number): TestRecord[] {
    const out: TestRecord[] = [];
    for (let i = 0; i < n; i++) {
      const k = `k${Math.floor(this.#random() * this.#keys)}${this.#pad}`;
      const v = 1 + Math.floor(this.#random() * 9);
      const seq = this.#seq++;
      out.push({ key: k, value: JSON.stringify({ k, v, seq }) });
      let l = this.expected.get(k);
      if (!l) this.expected.set(k, (l = []));
      l.push((l[l.length - 1] ?? 0) + v);
    }
    return out;
  }
}

/**
 * Asserts that `out` (read_committed) holds every running sum of every key exactly once and in
 * order, and nothing else.
 */
export function assertExactRunningSums(
  out: ReadRecord[],
  expected: ReadonlyMap<string, number[]>,
  /** What went wrong, when known (assertExactOutput's summary): in every failure's message. */
  why = '',
): void {
  let total = 0;
  for (const l of expected.values()) total += l.length;
  const because = why === '' ? '' : ` — ${why}`;
  assert.equal(out.length, total, `output count (got ${out.length}, want ${total})${because}`);
  const got = new Map<string, RunningSumOut[]>();
  // Output partitions are by key, and offsets order them: group by key in offset order.
  const sorted = [...out].sort(
    (a, b) => a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)),
  );
  for (const r of sorted) {
    const v = JSON.parse(r.value!) as RunningSumOut;
    let l = got.get(v.k);
    if (!l) got.set(v.k, (l = []));
    l.push(v);
  }
  assert.equal(got.size, expected.size, `keys in the output${because}`);
  for (const [k, sums] of expected) {
    const g = got.get(k) ?? [];
    assert.deepEqual(
      g.map((x) => x.sum),
      sums,
      `key ${k}: every intermediate sum exactly once, in order${because}`,
    );
    assert.deepEqual(
      g.map((x) => x.n),
      sums.map((_, i) => i + 1),
      `key ${k}: every count exactly once, in order${because}`,
    );
  }
}

/**
 * Why an output is not exact, for a failing test's diagnostics: per key, whether what came is a
 * prefix of the expected sums (a task behind or stuck) or differs (lost or repeated records), and
 * which output partitions the short keys are on.
 */
export function describeShortfall(out: ReadRecord[], expected: ReadonlyMap<string, number[]>): string {
  const got = new Map<string, { sums: number[]; offsets: string[]; partition: number }>();
  const sorted = [...out].sort(
    (a, b) => a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)),
  );
  for (const r of sorted) {
    const v = JSON.parse(r.value!) as RunningSumOut;
    let g = got.get(v.k);
    if (!g) got.set(v.k, (g = { sums: [], offsets: [], partition: r.partition }));
    g.sums.push(v.sum);
    g.offsets.push(r.offset);
  }
  let behind = 0;
  let wrong = 0;
  let missing = 0;
  const partitions = new Map<number, number>();
  const examples: string[] = [];
  const wrongPartitions = new Map<number, number>();
  for (const [k, sums] of expected) {
    const g = got.get(k);
    if (!g) {
      missing++;
      continue;
    }
    const prefix = g.sums.every((s, i) => s === sums[i]);
    if (prefix && g.sums.length === sums.length) continue;
    if (prefix) {
      behind += sums.length - g.sums.length;
      partitions.set(g.partition, (partitions.get(g.partition) ?? 0) + sums.length - g.sums.length);
    } else {
      wrong++;
      wrongPartitions.set(g.partition, (wrongPartitions.get(g.partition) ?? 0) + 1);
      if (examples.length < 6) {
        const at = g.sums.findIndex((s, i) => s !== sums[i]);
        const from = Math.max(0, at - 1);
        examples.push(
          `${k}@${at} (partition ${g.partition}, offsets ${g.offsets.slice(from, at + 3).join(',')}): got ${g.sums.slice(from, at + 3).join(',')} want ${sums.slice(from, at + 3).join(',')}`,
        );
      }
    }
  }
  return (
    `${behind} sums missing at the end of keys that are otherwise exact (by output partition: ${[...partitions].map(([p, n]) => `${p}:${n}`).join(' ') || 'none'}); ` +
    `${wrong} keys differ (by output partition: ${[...wrongPartitions].map(([p, n]) => `${p}:${n}`).join(' ') || 'none'}; ${examples.join('; ') || 'none'}); ${missing} keys absent; ` +
    describeRepeats(sorted)
  );
}

/**
 * What a surplus is made of: the same (partition, offset) read twice is the reader's doing; the
 * same input record (`seq`) at two offsets was written twice by the job, and whether its two
 * outputs agree tells a redo from the same state (same sum and count: a transaction committed
 * twice, or input read twice) from a redo on other state.
 */
export function describeRepeats(sorted: readonly ReadRecord[]): string {
  const at = new Set<string>();
  let reread = 0;
  const bySeq = new Map<number, Array<{ r: ReadRecord; v: RunningSumOut }>>();
  for (const r of sorted) {
    const where = `${r.partition}@${r.offset}`;
    if (at.has(where)) {
      reread++;
      continue;
    }
    at.add(where);
    const v = JSON.parse(r.value!) as RunningSumOut;
    let l = bySeq.get(v.seq);
    if (!l) bySeq.set(v.seq, (l = []));
    l.push({ r, v });
  }
  const twice = [...bySeq].filter(([, l]) => l.length > 1);
  const same = twice.filter(([, l]) => l.every((x) => x.v.sum === l[0]!.v.sum && x.v.n === l[0]!.v.n)).length;
  const byPartition = new Map<number, number>();
  for (const [, l] of twice)
    byPartition.set(l[0]!.r.partition, (byPartition.get(l[0]!.r.partition) ?? 0) + 1);
  const examples = twice
    .slice(0, 6)
    .map(
      ([seq, l]) =>
        `seq ${seq}: ${l.map((x) => `${x.r.partition}@${x.r.offset} sum ${x.v.sum} n ${x.v.n}`).join(' / ')}`,
    );
  return (
    `${reread} records read twice at the same offset; ${twice.length} inputs written more than once ` +
    `(${same} with the same sum and count; by output partition: ${[...byPartition].map(([p, n]) => `${p}:${n}`).join(' ') || 'none'}; ${examples.join('; ') || 'none'})`
  );
}

/**
 * One record per (partition, offset), and how many were dropped: the console consumer subscribes
 * with a group of its own and no committed offsets, so a rebalance of that group (its coordinator
 * moving after a broker restart) starts it again from the beginning of the partitions it gets
 * back. What it reads twice at one offset is the same record; the job's own repeats sit at other
 * offsets and stay.
 */
function onceEach<R extends { partition: number; offset: number | string }>(
  records: readonly R[],
): { records: R[]; rereads: number } {
  const seen = new Set<string>();
  const once = records.filter((r) => {
    const at = `${r.partition}@${r.offset}`;
    if (seen.has(at)) return false;
    seen.add(at);
    return true;
  });
  return { records: once, rereads: records.length - once.length };
}

/** Records the reader read twice at one offset, per list readCommittedUntil returned. */
const rereadsOf = new WeakMap<ReadRecord[], number>();

/**
 * Every committed record of `topic`, read by Kafka's own console consumer (read_committed, not
 * kafkajs), again every 3 s until there are at least `want` or `timeoutMs` passed. A record read
 * twice at one offset counts once ({@link onceEach}).
 */
export async function readCommittedUntil(
  topic: string,
  want: number,
  timeoutMs: number,
): Promise<ReadRecord[]> {
  let out: ReadRecord[] = [];
  const t0 = Date.now();
  for (;;) {
    const read = onceEach(await readCommittedWithJava(brokers().join(','), topic, { withValues: true }));
    out = read.records.map((r) => ({
      key: null,
      value: r.value,
      partition: r.partition,
      offset: String(r.offset),
      headers: r.headers,
    }));
    rereadsOf.set(out, read.rereads);
    if (out.length >= want || Date.now() - t0 >= timeoutMs) return out;
    await new Promise((r) => setTimeout(r, 3000));
  }
}

/**
 * The check of every running-sum test under faults: the output, read by Kafka's console consumer
 * (read_committed) until it holds as many records as `input` made (at most `timeoutMs`), must be
 * exactly the running sums. When it is not, everything that tells why goes to the test's
 * diagnostics and into the assertion's message (a CI log cut to the failure's lines keeps that,
 * and may drop the diagnostics below it): the shortfall, the reader's re-reads, the input topic's
 * count, where the group stands (`group`), what `diagnose` adds; then each worker's last own log
 * lines.
 */
export async function assertExactOutput(
  t: TestContext,
  opts: {
    output: string;
    input: RunningSumInput;
    workers: readonly WorkerProcess[];
    /** The app id (= group id): its committed offsets and the workers' tasks go to the diagnostics. */
    group?: string;
    /**
     * The job's input topic: read too, to tell input the test's producer wrote twice (or lost)
     * from outputs the job wrote twice.
     */
    inputTopic?: string;
    timeoutMs: number;
    /** More diagnostics; a string it returns goes in the assertion's message too. */
    diagnose?: (out: ReadRecord[]) => unknown;
  },
): Promise<ReadRecord[]> {
  const out = await readCommittedUntil(opts.output, opts.input.count, opts.timeoutMs);
  try {
    assertExactRunningSums(out, opts.input.expected);
    return out;
  } catch {
    // Not exact: find out why first, then fail with it.
  }
  const parts = [
    `${out.length} output records for ${opts.input.count} inputs`,
    describeShortfall(out, opts.input.expected),
    `${rereadsOf.get(out) ?? 0} records the reader read twice at one offset (counted once)`,
  ];
  try {
    if (opts.inputTopic !== undefined) parts.push(await describeInput(opts.inputTopic, opts.input.count));
    if (opts.group !== undefined) await diagnoseGroup(t, opts.group, opts.workers);
    const more = await opts.diagnose?.(out);
    if (typeof more === 'string' && more !== '') parts.push(more);
  } catch (e) {
    parts.push(`diagnostics failed: ${String(e)}`);
  }
  const why = parts.join('; ');
  t.diagnostic(why);
  dumpWorkerLogs(opts.workers);
  assertExactRunningSums(out, opts.input.expected, why);
  return out;
}

/** What the input topic holds against what the test sent: its count, and inputs held twice. */
async function describeInput(topic: string, sent: number): Promise<string> {
  try {
    const { records: held, rereads } = onceEach(
      await readCommittedWithJava(brokers().join(','), topic, { withValues: true }),
    );
    const seqs = new Set<number>();
    let twice = 0;
    for (const r of held) {
      const seq = (JSON.parse(r.value) as { seq: number }).seq;
      if (seqs.has(seq)) twice++;
      seqs.add(seq);
    }
    return `input topic ${topic}: ${held.length} records for ${sent} sent, ${seqs.size} distinct, ${twice} held twice (${rereads} read twice at one offset, counted once)`;
  } catch (e) {
    return `input topic ${topic} unreadable: ${String(e)}`;
  }
}
