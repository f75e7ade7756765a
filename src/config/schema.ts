import { accessSync, constants } from 'node:fs';
import { z } from 'zod';

/**
 * The one configuration schema. Files, `SLUICE_*` environment variables and CLI flags all feed
 * it; the leaf paths below are also the names of the env variables and flags
 * (`processing.commitIntervalMs` ⇄ `SLUICE_PROCESSING_COMMIT_INTERVAL_MS` ⇄ `--processing.commitIntervalMs`).
 * Every object is strict: an unknown key is an error, never silently ignored.
 */
/** Readable file: checked once at start, so a typo fails with its path instead of at the first TLS handshake. */
const readableFile = z
  .string()
  .min(1)
  .refine(
    (p) => {
      try {
        accessSync(p, constants.R_OK);
        return true;
      } catch {
        return false;
      }
    },
    { message: 'cannot read this file' },
  );

/** TLS to the brokers (kafkajs `ssl`). Paths to PEM files; the key is read once at start. */
const kafkaSsl = z
  .object({
    enabled: z.boolean().default(false),
    /** CA certificate(s) that signed the brokers' certificates; Node's default CAs when absent. */
    ca: readableFile.optional(),
    /** Client certificate (mutual TLS); needs `key`. */
    cert: readableFile.optional(),
    /** Client private key (mutual TLS); needs `cert`. Never logged. */
    key: readableFile.optional(),
    /** Verify the brokers' certificates. Turn off only against a test broker. */
    rejectUnauthorized: z.boolean().default(true),
  })
  .strict()
  .superRefine((s, ctx) => {
    if (!s.enabled) {
      for (const k of ['ca', 'cert', 'key'] as const)
        if (s[k] !== undefined)
          ctx.addIssue({ code: 'custom', path: [k], message: 'set, but kafka.ssl.enabled is false' });
    }
    if ((s.cert === undefined) !== (s.key === undefined))
      ctx.addIssue({
        code: 'custom',
        path: [s.cert === undefined ? 'cert' : 'key'],
        message: 'kafka.ssl.cert and kafka.ssl.key go together',
      });
  });

/** SASL authentication to the brokers (kafkajs `sasl`). */
const kafkaSasl = z
  .object({
    /** `plain`, `scram-sha-256` or `scram-sha-512` (any case); no SASL when absent. */
    mechanism: z
      .preprocess(
        (v) => (typeof v === 'string' ? v.toLowerCase() : v),
        z.enum(['plain', 'scram-sha-256', 'scram-sha-512']),
      )
      .optional(),
    username: z.string().min(1).optional(),
    /** Never logged; prefer the env variable SLUICE_KAFKA_SASL_PASSWORD to a file. */
    password: z.string().min(1).optional(),
  })
  .strict()
  .superRefine((s, ctx) => {
    if (s.mechanism === undefined) {
      for (const k of ['username', 'password'] as const)
        if (s[k] !== undefined)
          ctx.addIssue({ code: 'custom', path: [k], message: 'set, but kafka.sasl.mechanism is not' });
      return;
    }
    for (const k of ['username', 'password'] as const)
      if (s[k] === undefined)
        ctx.addIssue({
          code: 'custom',
          path: [k],
          message: `required by kafka.sasl.mechanism ${s.mechanism}`,
        });
  });

/** What Kafka accepts as a group.instance.id (as for a topic name: 1–249 of these characters). */
export const GROUP_INSTANCE_ID_PATTERN = /^[A-Za-z0-9._-]{1,249}$/;

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
    /**
     * At-least-once: how long a produce request waits for more records after the first it holds
     * (Kafka's producer `linger.ms`, 5 by default since Kafka 4.0, KIP-1030). The worker's tasks
     * send their outputs after each batch; without a wait a request carries only what came while
     * the one before was in flight. While a task is a second or more behind its input, its early
     * outputs wait at least 50 ms (PlainProducer, BACKLOG_LINGER_MS). Exactly-once sends once per
     * checkpoint and does not wait.
     */
    lingerMs: z.number().int().min(0).max(1000).default(5),
    /**
     * Static group membership (KIP-345): the worker joins with a `group.instance.id`, so a restart
     * within sessionTimeoutMs gets its tasks back without a rebalance, and a stop does not leave
     * the group (see leaveGroupOnClose). `false`: a dynamic member, which leaves on every stop.
     */
    staticMembership: z.boolean().default(true),
    /**
     * The worker's group.instance.id (in Kubernetes, the pod name). Unset: an id made once and
     * kept in `<state.dir>/<appId>/instance-id`. Two live workers must never share one.
     */
    groupInstanceId: z
      .string()
      .regex(GROUP_INSTANCE_ID_PATTERN, "1–249 of the characters A–Z, a–z, 0–9, '.', '_' and '-'")
      .optional(),
    /** A static member leaves the group when it stops (scale-down: its tasks move at once). */
    leaveGroupOnClose: z.boolean().default(false),
    /**
     * Copies of each internal topic the worker creates (changelogs, repartition topics, the DLQ,
     * the topology and overflow topics). Unset: min(3, brokers the cluster lists when the topics
     * are created). Topics that exist already are left as they are.
     */
    replicationFactor: z.number().int().min(1).max(32_767).optional(),
    ssl: kafkaSsl.prefault({}),
    sasl: kafkaSasl.prefault({}),
  })
  .strict()
  .superRefine((k, ctx) => {
    // As Kafka's consumer: a member that heartbeats less often than its session lasts is
    // removed from the group between two heartbeats, over and over.
    if (k.heartbeatIntervalMs >= k.sessionTimeoutMs)
      ctx.addIssue({
        code: 'custom',
        path: ['heartbeatIntervalMs'],
        message: `must be below kafka.sessionTimeoutMs (${k.sessionTimeoutMs}); a third of it or less is usual`,
      });
  });

const processing = z
  .object({
    guarantee: z.enum(['exactly_once', 'at_least_once']).default('exactly_once'),
    /**
     * Exactly-once: what one transaction covers. `task` (EOS v1): one transactional producer per
     * task, `<appId>-<taskId>`, whose start fences the task's previous owner. `worker` (EOS v2,
     * KIP-447, as Kafka Streams' exactly_once_v2): one producer per worker commits all its tasks
     * in one transaction per interval, fenced by the group's generation; fewer transactions, less
     * broker work, but a new owner waits out a frozen worker's open transaction (10 s at most).
     */
    transactions: z.enum(['task', 'worker']).default('worker'),
    /**
     * How often a task checkpoints (outputs, changelog, offsets). 100 ms as in Kafka Streams under
     * exactly-once: output becomes visible to read_committed readers only at a checkpoint, so this
     * bounds the added latency, while each checkpoint costs a transaction round trip.
     */
    commitIntervalMs: z.number().int().min(1).max(600_000).default(100),
    /**
     * Exactly-once with `transactions: worker`: a worker with time to spare commits sooner than
     * `commitIntervalMs` (never more often than this, nor a fifth of the interval), so that outputs
     * become visible sooner at low and moderate load. A worker whose input is caught up checkpoints
     * once the interval × its event loop's busy share has passed (commit-pacer.ts); a saturated or
     * lagging one on the interval only. At or above `commitIntervalMs`: on the interval only, as
     * Kafka Streams.
     */
    minCommitIntervalMs: z.number().int().min(1).max(600_000).default(20),
    /**
     * Stream threads of one `sluice run` process (Kafka Streams' `num.stream.threads`): each is a
     * worker of its own on a `worker_thread` (a group member with its own consumer, producer and
     * state folder, `<state.dir>/thread-<i>` past the first), so one process uses several cores.
     * The memory bounds (`state.cacheMaxBytes`, `state.recordCacheMaxBytes`,
     * `processing.asyncMaxBytes`) are the process's, shared out between the threads. One HTTP
     * server answers for all of them.
     */
    threads: z.number().int().min(1).max(64).default(1),
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
    /**
     * Start although the job changed in a way that orphans or corrupts state (a renamed store, a
     * changed key serde, a changed partition count): the changes are logged and recorded.
     */
    allowStateChange: z.boolean().default(false),
    /**
     * Event time: a stream input of a task with no record for this long (wall clock) is idle and
     * stops holding the watermark back, as Flink's `withIdleness`. 0 (default): never idle.
     */
    idleTimeoutMs: z.number().int().min(0).default(0),
    /**
     * Event time: once every stream input of a task has been quiet this long, the watermark
     * follows the wall clock (max event time seen + time since the last record − disorder), so the
     * last windows close. 0 (default): off.
     */
    idleAdvanceMs: z.number().int().min(0).default(0),
    /**
     * How often a worker deletes the records of its repartition partitions that the app has
     * committed past (Kafka Streams' `repartition.purge.interval.ms`). Repartition topics keep
     * records without a time limit, so this is what bounds them. 0: never.
     */
    repartitionPurgeIntervalMs: z.number().int().min(0).max(86_400_000).default(30_000),
    /**
     * A task with several inputs processes their records in timestamp order; an input with
     * nothing buffered holds the others back for up to this long, unless its last fetch reached
     * the end of the partition (Kafka Streams' `max.task.idle.ms`). -1: never wait.
     */
    maxTaskIdleMs: z.number().int().min(-1).default(1000),
    /**
     * Bytes of input records a worker holds in its async stages (mapAsync, ...) at most, over
     * all tasks; past it, fetching waits until records leave (each stage also holds at most
     * twice its `concurrency`).
     */
    asyncMaxBytes: z
      .number()
      .int()
      .min(1024)
      .default(64 * 1024 * 1024),
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
    /**
     * Memory bound of one worker's record caches (Kafka Streams' `statestore.cache.max.bytes`),
     * shared out between its tasks: aggregations send at most one update per key per checkpoint
     * downstream. 0 sends every update.
     */
    recordCacheMaxBytes: z
      .number()
      .int()
      .min(0)
      .default(10 * 1024 * 1024),
    /**
     * Changelog records a task's value stores may commit before RocksDB takes them (one batch;
     * Kafka Streams writes its local checkpoint every 10,000 records under exactly-once, and its
     * RocksDB takes every put). Until then reads of those keys are served from memory (at most a
     * quarter of the task's share of `cacheMaxBytes`); after a crash they are replayed from the
     * changelogs. 0 writes RocksDB at every checkpoint. More than 2,048 keys go in batches of
     * 2,048, one per event-loop turn (write-behind.ts).
     */
    localCheckpointRecords: z.number().int().min(0).default(100_000),
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
    /**
     * Bearer token required for /status, /state and the status page (`Authorization: Bearer <token>`);
     * open when absent. Never logged.
     */
    authToken: z.string().min(16, 'at least 16 characters').optional(),
    /** Require the token for /metrics too (/healthz and /readyz stay open for probes). */
    authMetrics: z.boolean().default(false),
  })
  .strict();

/**
 * What a worker does when records arrive faster than it can process them (docs/OPERATIONS.md,
 * "Overload"). Shed fraction p = max(0, 1 − H·C / (λ + lag/τ)), re-evaluated every
 * `evaluateIntervalMs`, smoothed.
 */
const overload = z
  .object({
    /** `backpressure` never drops (lag grows); `shed` drops; `divert` writes shed records to `<appId>-overflow`. */
    mode: z.enum(['backpressure', 'shed', 'divert']).default('backpressure'),
    /** H: the fraction of measured capacity the worker may use; the rest absorbs noise and overheads. */
    headroom: z.number().gt(0).max(1).default(0.9),
    /** τ: a backlog should drain within this time; lag/τ is added to the arrival rate. */
    latencyTargetMs: z.number().int().min(100).max(3_600_000).default(5000),
    /** `source`: drop before deserializing, at the input; `operator`: at the job's `.shed()` points. */
    placement: z.enum(['source', 'operator']).default('source'),
    /** `random`: each record with probability p; `priority`: lowest `priority(value)` first (needs `operator`). */
    drop: z.enum(['random', 'priority']).default('random'),
    /** How often λ, C, lag and p are re-evaluated (one ListOffsets per input topic each time). */
    evaluateIntervalMs: z.number().int().min(100).max(60_000).default(1000),
    /** EWMA weight of a new sample of λ, C and p (1 = no smoothing). */
    smoothing: z.number().gt(0).max(1).default(0.5),
  })
  .strict();

/**
 * The Schema Registry of the `avro()`, `protobuf()` and `jsonSchema()` serdes (Confluent's REST
 * API; Apicurio serves it under `/apis/ccompat/v7`). Needed only by jobs that use them.
 */
const schemaRegistry = z
  .object({
    /** `mock://<scope>`: an in-memory registry (tests, the TestDriver). */
    url: z.url({ protocol: /^(https?|mock)$/ }).optional(),
    auth: z
      .object({
        /** HTTP basic auth; with `password`. */
        username: z.string().min(1).optional(),
        /** Never logged; prefer the env variable SLUICE_SCHEMA_REGISTRY_AUTH_PASSWORD. */
        password: z.string().min(1).optional(),
        /** `Authorization: Bearer <token>`; instead of basic auth. Never logged. */
        bearerToken: z.string().min(1).optional(),
      })
      .strict()
      .superRefine((a, ctx) => {
        if ((a.username === undefined) !== (a.password === undefined))
          ctx.addIssue({
            code: 'custom',
            path: [a.username === undefined ? 'username' : 'password'],
            message: 'schemaRegistry.auth.username and schemaRegistry.auth.password go together',
          });
        if (a.bearerToken !== undefined && a.username !== undefined)
          ctx.addIssue({
            code: 'custom',
            path: ['bearerToken'],
            message: 'either basic auth (username, password) or bearerToken, not both',
          });
      })
      .prefault({}),
    /** Register a writer's schema at start when its subject lacks it (a serde's own `autoRegister` wins). */
    autoRegister: z.boolean().default(true),
    /** How long one registry request may take. */
    timeoutMs: z.number().int().min(100).max(120_000).default(10_000),
  })
  .strict()
  .superRefine((r, ctx) => {
    if (r.url !== undefined) return;
    for (const k of ['username', 'password', 'bearerToken'] as const)
      if (r.auth[k] !== undefined)
        ctx.addIssue({ code: 'custom', path: ['auth', k], message: 'set, but schemaRegistry.url is not' });
  });

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
    overload: overload.prefault({}),
    schemaRegistry: schemaRegistry.prefault({}),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.kafka.groupInstanceId !== undefined && !c.kafka.staticMembership)
      ctx.addIssue({
        code: 'custom',
        path: ['kafka', 'groupInstanceId'],
        message: 'set, but kafka.staticMembership is false',
      });
    if (
      c.kafka.groupInstanceId !== undefined &&
      c.processing.threads > 1 &&
      `${c.kafka.groupInstanceId}-t${c.processing.threads - 1}`.length > 249
    )
      ctx.addIssue({
        code: 'custom',
        path: ['kafka', 'groupInstanceId'],
        message: `too long for ${c.processing.threads} threads: thread i joins as <id>-t<i>, at most 249 characters`,
      });
    if (c.http.authMetrics && c.http.authToken === undefined)
      ctx.addIssue({ code: 'custom', path: ['http', 'authMetrics'], message: 'needs http.authToken' });
    if (c.overload.drop === 'priority' && c.overload.placement !== 'operator')
      ctx.addIssue({
        code: 'custom',
        path: ['overload', 'drop'],
        message:
          "overload.drop 'priority' needs overload.placement 'operator' (priorities come from the job's .shed({ priority }) points)",
      });
  });

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
