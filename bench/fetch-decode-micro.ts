/**
 * Micro-benchmark of the fetch decoder (src/kafka/fetch-decoder.ts) and the record loop's read of
 * each record's timestamp: one uncompressed, transactional batch of 1,000 records as the bench's
 * input holds them (string keys over 100 users, JSON values of about 100 bytes, 50 records per
 * millisecond, as a fast producer writes them), decoded over and over. Prints CPU ns per record
 * (user + system of this process, which does nothing else). `--root` takes another checkout's
 * build, to compare two versions.
 *
 *   npm run build && node dist/bench/fetch-decode-micro.js [--root ../other-checkout] [--batches 4000]
 */
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { optionValue } from './lib/args.js';
import { root } from './lib/procs.js';

interface Rec {
  timestamp: string;
  ts?: number;
}

async function main() {
  const from = resolve(optionValue('--root') ?? root);
  const batches = Number(optionValue('--batches') ?? 4000);
  const mod = (await import(pathToFileURL(`${from}/dist/src/kafka/fetch-decoder.js`).href)) as {
    decodeBatchAt(b: Buffer, start: number): { batch: { records: Rec[] } } | undefined;
  };
  const require = createRequire(`${root}/package.json`);
  const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0/index.js');
  const Record = require('kafkajs/src/protocol/recordBatch/record/v0/index.js');
  const Long = require('kafkajs/src/utils/long.js');
  const n = 1000;
  const t0 = 1_764_633_000_000;
  const records = Array.from({ length: n }, (_, i) =>
    Record({
      offsetDelta: i,
      timestampDelta: Long.fromValue(Math.floor(i / 50)),
      key: Buffer.from(`user-${i % 100}`),
      value: Buffer.from(
        JSON.stringify({ user: `user-${i % 100}`, page: `/p/${i}`, kind: 'click', amount: 1.5, at: t0 + i }),
      ),
      headers: {},
    }),
  );
  const enc = await RecordBatch({
    compression: 0,
    firstOffset: Long.fromValue(123_456),
    firstTimestamp: t0,
    maxTimestamp: t0 + 19,
    lastOffsetDelta: n - 1,
    transactional: true,
    producerId: Long.fromValue(7),
    producerEpoch: 0,
    firstSequence: 0,
    records,
  });
  const bytes = Buffer.from(enc.buffer as Buffer);
  let sum = 0;
  for (let round = 0; round < 2; round++) {
    const t = process.cpuUsage();
    for (let j = 0; j < batches; j++) {
      const got = mod.decodeBatchAt(bytes, 0);
      if (got === undefined) throw new Error('the batch went to kafkajs’s decoder');
      // The timestamp as a number: `ts` where a decoder gives it (commit 3f3f79d did), else the
      // string parsed, as the record loop does (`Number(r.timestamp)`, src/runtime/record-loop.ts).
      for (const r of got.batch.records) sum = (sum + (r.ts ?? Number(r.timestamp))) % 1_000_003;
    }
    const u = process.cpuUsage(t);
    // The first round warms the JIT up.
    if (round === 1)
      console.log(
        `${from}: ${(((u.user + u.system) * 1000) / (batches * n)).toFixed(1)} CPU ns per record (${batches * n} records, checksum ${sum})`,
      );
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
