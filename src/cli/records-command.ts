import { createInterface } from 'node:readline';
import { loadConfig } from '../config/load.js';
import type { SluiceConfig } from '../config/schema.js';
import { ConfigError } from '../errors.js';
import { KafkaClient } from '../kafka/client.js';
import { type TailedRecord, TopicTail } from '../kafka/tail.js';
import type { OutRecord } from '../kafka/types.js';
import { createLogger } from '../ops/logger.js';
import { secretsOf } from '../ops/redact.js';
import { didYouMean } from '../suggest.js';
import { parseArgs } from './args.js';
import { UsageError } from './usage.js';

/** Records sent per produce request when reading stdin. */
const PRODUCE_BATCH = 500;

/** A line of `sluice produce` as a record: split at the first separator into key and value. */
export function lineToRecord(line: string, separator: string | undefined): OutRecord {
  if (separator === undefined || separator === '') return { key: null, value: Buffer.from(line, 'utf8') };
  const at = line.indexOf(separator);
  if (at < 0) return { key: null, value: Buffer.from(line, 'utf8') };
  return {
    key: Buffer.from(line.slice(0, at), 'utf8'),
    value: Buffer.from(line.slice(at + separator.length), 'utf8'),
  };
}

/** A record as `sluice tail` prints it: tab-separated text, or one JSON object. */
export function formatTailed(r: TailedRecord, format: 'text' | 'json'): string {
  const text = (b: Buffer | null) => (b === null ? null : b.toString('utf8'));
  if (format === 'json')
    return JSON.stringify({
      partition: r.partition,
      offset: r.offset,
      timestamp: Number(r.timestamp),
      key: text(r.key),
      value: text(r.value),
    });
  const cell = (b: Buffer | null) => (b === null ? 'null' : b.toString('utf8').replace(/[\t\n\r]/g, ' '));
  return `${r.partition}\t${r.offset}\t${cell(r.key)}\t${cell(r.value)}`;
}

function clientFor(config: Readonly<SluiceConfig>): KafkaClient {
  const logger = createLogger({ level: 'warn', format: 'json', secrets: secretsOf(config) });
  return new KafkaClient({ ...config.kafka, clientId: `${config.kafka.clientId}-cli` }, logger);
}

/** Fails with a "did you mean" when the topic does not exist (nothing is created by these commands). */
async function mustExist(client: KafkaClient, topic: string): Promise<void> {
  const existing = await (await client.admin()).listTopics();
  if (!existing.includes(topic))
    throw new UsageError(
      `topic ${JSON.stringify(topic)} does not exist${didYouMean(topic, existing)}; create it with sluice topics create ${topic}`,
    );
}

/** `sluice produce <topic> [value ...] [--key-separator SEP]`. */
export async function produceCommand(argv: string[]): Promise<number> {
  const args = parseArgs(argv, [], ['key-separator']);
  const [topic, ...values] = args.positionals;
  if (!topic) throw new UsageError('produce needs a topic', 'produce');
  const sep = args.switches.get('key-separator');
  const config = loadConfig({ file: args.configFile, flags: args.settings });
  const client = clientFor(config);
  let sent = 0;
  try {
    await mustExist(client, topic);
    const producer = await client.plainProducer();
    try {
      const send = async (lines: string[]) => {
        if (lines.length === 0) return;
        await producer.send(new Map([[topic, lines.map((l) => lineToRecord(l, sep))]]));
        sent += lines.length;
      };
      if (values.length > 0) await send(values);
      else {
        let batch: string[] = [];
        for await (const line of createInterface({
          input: process.stdin,
          crlfDelay: Number.POSITIVE_INFINITY,
        })) {
          if (line === '') continue;
          batch.push(line);
          if (batch.length >= PRODUCE_BATCH) {
            await send(batch);
            batch = [];
          }
        }
        await send(batch);
      }
    } finally {
      await producer.close();
    }
  } finally {
    await client.close();
  }
  process.stderr.write(`produced ${sent} record${sent === 1 ? '' : 's'} to ${topic}\n`);
  return 0;
}

/** `sluice tail <topic> [--from-beginning] [--read-committed] [--max-records N] [--format text|json]`. */
export async function tailCommand(argv: string[]): Promise<number> {
  const args = parseArgs(argv, ['from-beginning', 'read-committed'], ['max-records', 'format']);
  const [topic, ...extra] = args.positionals;
  if (!topic || extra.length > 0) throw new UsageError('tail takes one topic', 'tail');
  const format = args.switches.get('format') ?? 'text';
  if (format !== 'text' && format !== 'json')
    throw new UsageError(`--format must be text or json, not ${JSON.stringify(format)}`, 'tail');
  const maxText = args.switches.get('max-records');
  const max = maxText === undefined ? undefined : Number(maxText);
  if (max !== undefined && (!Number.isInteger(max) || max < 1))
    throw new ConfigError(
      [{ path: 'flag --max-records', message: `expected a whole number ≥ 1, got ${maxText}` }],
      'command line',
    );
  const config = loadConfig({ file: args.configFile, flags: args.settings });
  const client = clientFor(config);
  const tail = new TopicTail(client.kafka);
  let seen = 0;
  let done: () => void = () => undefined;
  const finished = new Promise<void>((r) => {
    done = r;
  });
  const onSignal = () => done();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await mustExist(client, topic);
    await tail.start(
      {
        topic,
        readCommitted: args.switches.get('read-committed') === 'true',
        fromBeginning: args.switches.get('from-beginning') === 'true',
      },
      (r) => {
        if (max !== undefined && seen >= max) return;
        seen++;
        process.stdout.write(`${formatTailed(r, format)}\n`);
        if (max !== undefined && seen >= max) done();
      },
    );
    await finished;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await tail.stop();
    await client.close();
  }
  return 0;
}
