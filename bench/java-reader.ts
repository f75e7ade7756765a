/**
 * A read_committed reader that is not kafkajs: Kafka's own console consumer (Java), from the jars
 * the local launcher resolves. The DLQ fuzz bench uses it to check a failed verdict, because
 * kafkajs's read_committed consumer (2.2.4) was seen delivering records of an aborted transaction:
 * after a run with SIGKILLs, DumpLogSegments showed a DLQ batch (offsets 5665–5682) ended by an
 * ABORT marker, kafkajs readers returned its 18 records on every read, and this reader did not.
 * Where kafkajs's filter (`src/consumer/filterAbortedMessages.js`) goes wrong is not pinned down yet.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { resolveKafka } from '../src/dev/kafka-jars.js';

export interface JavaRecord {
  partition: number;
  offset: number;
  headers: Record<string, string>;
  value: string;
}

/** Every committed record of `topic` (values must be text without newlines, or `withValues` false). */
export async function readCommittedWithJava(
  brokers: string,
  topic: string,
  opts: { withValues: boolean },
): Promise<JavaRecord[]> {
  const { version, libsDir } = await resolveKafka({});
  const main =
    Number(version.split('.')[0]) >= 4
      ? 'org.apache.kafka.tools.consumer.ConsoleConsumer'
      : 'kafka.tools.ConsoleConsumer';
  const args = [
    '-Xmx512m',
    '-cp',
    join(libsDir, '*'),
    main,
    '--bootstrap-server',
    brokers,
    '--topic',
    topic,
    '--from-beginning',
    '--isolation-level',
    'read_committed',
    '--timeout-ms',
    '15000',
    ...[
      'print.partition=true',
      'print.offset=true',
      'print.headers=true',
      'print.key=false',
      `print.value=${opts.withValues}`,
    ].flatMap((p) => ['--property', p]),
  ];
  const child = spawn('java', args, { stdio: ['ignore', 'pipe', 'ignore'] });
  let text = '';
  child.stdout.on('data', (d: Buffer) => {
    text += d.toString('utf8');
  });
  await new Promise((r) => child.once('exit', r));
  const out: JavaRecord[] = [];
  for (const line of text.split('\n')) {
    const m = /^Partition:(\d+)\tOffset:(\d+)\t([^\t]*)(?:\t(.*))?$/.exec(line);
    if (!m) continue;
    const headers: Record<string, string> = {};
    if (m[3] !== 'NO_HEADERS')
      for (const kv of m[3]!.split(',sluice.')) {
        const [k, ...v] = (kv.startsWith('sluice.') ? kv : `sluice.${kv}`).split(':');
        headers[k!] = v.join(':');
      }
    out.push({ partition: Number(m[1]), offset: Number(m[2]), headers, value: m[4] ?? '' });
  }
  return out;
}
