import { z } from 'zod';

/**
 * The one configuration schema. Files, `SLUICE_*` environment variables and CLI flags all feed
 * it; the leaf paths below are also the names of the env variables and flags
 * (`processing.commitIntervalMs` ⇄ `SLUICE_PROCESSING_COMMIT_INTERVAL_MS` ⇄ `--processing.commitIntervalMs`).
 * Every object is strict: an unknown key is an error, never silently ignored.
 */
const kafka = z
  .object({
    /** Bootstrap brokers. `KAFKA_BROKERS` (comma-separated) is honoured as well. */
    brokers: z
      .array(z.string().regex(/^[^\s:]+:\d+$/, 'expected host:port'))
      .min(1)
      .default(['127.0.0.1:9092']),
    clientId: z.string().min(1).default('sluice'),
    /** How long a request may take before kafkajs retries it. */
    requestTimeoutMs: z.number().int().min(1000).max(300_000).default(30_000),
    /** Consumer session timeout: a worker silent for this long is removed from the group. */
    sessionTimeoutMs: z.number().int().min(6000).max(300_000).default(30_000),
    /** How often a worker heartbeats; must be well below sessionTimeoutMs. */
    heartbeatIntervalMs: z.number().int().min(100).max(60_000).default(3000),
  })
  .strict();

const processing = z
  .object({
    guarantee: z.enum(['exactly_once', 'at_least_once']).default('exactly_once'),
    /**
     * How often a task checkpoints (outputs, changelog, offsets). 100 ms as in Kafka Streams under
     * exactly-once: output becomes visible to read_committed readers only at a checkpoint, so this
     * bounds the added latency, while each checkpoint costs a transaction round trip.
     */
    commitIntervalMs: z.number().int().min(1).max(600_000).default(100),
    /** Partitions processed concurrently by one worker (kafkajs partitionsConsumedConcurrently). */
    concurrency: z.number().int().min(1).max(256).default(8),
    /** Records read per partition per fetch, at most (bytes). */
    maxBytesPerPartition: z
      .number()
      .int()
      .min(1024)
      .max(64 * 1024 * 1024)
      .default(1024 * 1024),
    /** Where records nobody can read or process go: `dlq` (default), `skip` (count and drop) or `fail`. */
    errorPolicy: z.enum(['dlq', 'skip', 'fail']).default('dlq'),
    /** Event time: allowed out-of-orderness subtracted from the max event time seen. */
    maxOutOfOrdernessMs: z.number().int().min(0).default(0),
  })
  .strict();

const state = z
  .object({
    /** Root of the local state; a task's RocksDB lives in `<dir>/<appId>/<taskId>/`. */
    dir: z.string().min(1).default('./.sluice-state'),
    /** Memory bound of one worker's write-back caches, shared out between its tasks. */
    cacheMaxBytes: z
      .number()
      .int()
      .min(0)
      .default(64 * 1024 * 1024),
  })
  .strict();

const http = z
  .object({
    enabled: z.boolean().default(true),
    host: z.string().min(1).default('127.0.0.1'),
    /** 0 picks a free port (printed at start). */
    port: z.number().int().min(0).max(65535).default(9464),
    /**
     * The URL other workers use to reach this one (routed state queries). Unset: `http://<host>:<port>`,
     * with the machine's hostname when `host` is a wildcard (0.0.0.0, ::).
     */
    advertisedUrl: z.url({ protocol: /^https?$/ }).optional(),
  })
  .strict();

const log = z
  .object({
    level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    /** `auto`: pretty when stdout is a terminal, JSON otherwise. */
    format: z.enum(['auto', 'json', 'pretty']).default('auto'),
  })
  .strict();

export const configSchema = z
  .object({
    kafka: kafka.prefault({}),
    processing: processing.prefault({}),
    state: state.prefault({}),
    http: http.prefault({}),
    log: log.prefault({}),
  })
  .strict();

export type SluiceConfig = z.infer<typeof configSchema>;
/** What a caller may pass in code: any subset, deeply. */
export type SluiceConfigInput = z.input<typeof configSchema>;

export type LeafKind = 'string' | 'number' | 'boolean' | 'string[]' | 'enum';
export interface Leaf {
  path: string[];
  kind: LeafKind;
}

function unwrap(t: z.ZodType): z.ZodType {
  let cur: any = t;
  while (
    cur?.def &&
    (cur.def.type === 'default' || cur.def.type === 'optional' || cur.def.type === 'prefault')
  ) {
    cur = cur.def.innerType;
  }
  return cur;
}

function leavesOf(t: z.ZodType, prefix: string[], out: Leaf[]): Leaf[] {
  const u: any = unwrap(t);
  if (u.def.type === 'object') {
    for (const [k, v] of Object.entries(u.shape as Record<string, z.ZodType>))
      leavesOf(v, [...prefix, k], out);
    return out;
  }
  const kind: LeafKind =
    u.def.type === 'array'
      ? 'string[]'
      : u.def.type === 'number'
        ? 'number'
        : u.def.type === 'boolean'
          ? 'boolean'
          : u.def.type === 'enum'
            ? 'enum'
            : 'string';
  out.push({ path: prefix, kind });
  return out;
}

/** Every settable leaf of the schema, with the kind used to coerce env and flag strings. */
export const configLeaves: readonly Leaf[] = Object.freeze(leavesOf(configSchema, [], []));

/** `processing.commitIntervalMs` → `SLUICE_PROCESSING_COMMIT_INTERVAL_MS`. */
export function envNameOf(path: readonly string[]): string {
  return `SLUICE_${path.map((p) => p.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()).join('_')}`;
}
