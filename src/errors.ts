/**
 * The one root of Sluice's errors. Every error carries a `code` (listed in docs/errors.md),
 * whether retrying can help (`retriable`), and the `cause` that led to it.
 *
 * Subclasses are named for the recovery they demand, as in Kafka Streams:
 * - {@link TaskMigratedError}: another worker owns the task now (we were fenced); close it, rejoin.
 * - {@link TaskCorruptedError}: local state cannot be trusted; wipe it and restore from the changelog.
 */
export const ERROR_CODES = [
  'SLUICE_CONFIG_INVALID',
  'SLUICE_JOB_INVALID',
  'SLUICE_TOPOLOGY_INVALID',
  'SLUICE_NOT_COPARTITIONED',
  'SLUICE_TASK_MIGRATED',
  'SLUICE_TASK_CORRUPTED',
  'SLUICE_RESTORE_INCOMPLETE',
  'SLUICE_STATE_LOCKED',
  'SLUICE_STATE_IO',
  'SLUICE_KAFKA',
  'SLUICE_KAFKA_AUTH',
  'SLUICE_KAFKAJS_UNPATCHED',
  'SLUICE_FENCED_INSTANCE',
  'SLUICE_LOCAL_KAFKA_UNAVAILABLE',
  'SLUICE_SERDE',
  'SLUICE_OPERATOR',
  'SLUICE_STATE_CHANGE',
  'SLUICE_SCHEMA_REGISTRY',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

export class SluiceError extends Error {
  readonly code: ErrorCode;
  readonly retriable: boolean;

  constructor(code: ErrorCode, message: string, opts: { cause?: unknown; retriable?: boolean } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.code = code;
    this.retriable = opts.retriable ?? false;
  }
}

/** One problem of a configuration, named by its path (`processing.guarantee`, `flag --foo`, `env SLUICE_X`). */
export interface ConfigProblem {
  path: string;
  message: string;
  /** Where the value came from, when known: `env SLUICE_HTTP_PORT`, `flag --http.port`, `file x.yaml`, `code`. */
  source?: string;
}

/** Bad configuration: fix the listed problems and start again. Lists every problem, not the first. */
export class ConfigError extends SluiceError {
  readonly problems: readonly ConfigProblem[];
  constructor(problems: ConfigProblem[], source = 'configuration') {
    const lines = problems
      .map((p) => `  - ${p.path}${p.source === undefined ? '' : ` (${p.source})`}: ${p.message}`)
      .join('\n');
    super(
      'SLUICE_CONFIG_INVALID',
      `Invalid ${source} (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n${lines}`,
    );
    this.problems = problems;
  }
}

/** The job or its topology is wrong (a programming error in the job file); fix the job. */
export class TopologyError extends SluiceError {
  constructor(message: string, code: ErrorCode = 'SLUICE_TOPOLOGY_INVALID') {
    super(code, message);
  }
}

/**
 * The task's transactional producer was fenced: another worker took the task over.
 * The runtime closes the task without committing; nothing is lost, the new owner continues.
 */
export class TaskMigratedError extends SluiceError {
  constructor(taskId: string, cause?: unknown) {
    super('SLUICE_TASK_MIGRATED', `task ${taskId} migrated to another worker`, { cause, retriable: true });
  }
}

/**
 * The task's local state disagrees with its changelog (e.g. the changelog was deleted and
 * recreated). The runtime wipes the task's folder and restores it from the changelog.
 */
export class TaskCorruptedError extends SluiceError {
  constructor(taskId: string, reason: string) {
    super('SLUICE_TASK_CORRUPTED', `task ${taskId} state corrupted: ${reason}`, { retriable: true });
  }
}

/** A record could not be (de)serialized. Goes to the dead-letter topic under the default policy. */
export class SerdeError extends SluiceError {
  constructor(message: string, cause?: unknown) {
    super('SLUICE_SERDE', message, { cause });
  }
}

/**
 * The Schema Registry could not be used at start: unreachable, refused the credentials, refused a
 * schema (incompatible with the subject's earlier versions), or has no schema the job needs
 * (auto-registration off). During processing the same failures make the record a SerdeError
 * (dead-lettered by the default policy) instead.
 */
export class SchemaRegistryError extends SluiceError {
  /** The HTTP status of the registry's answer, when there was one. */
  readonly status: number | undefined;
  /** The registry's own `error_code` (e.g. 40401 subject not found, 409 incompatible). */
  readonly registryCode: number | undefined;
  /** No answer: refused, reset, timed out (not a mistake of the job's or its configuration). */
  readonly unreachable: boolean;
  /**
   * How long the registry asked to be left alone (its `Retry-After` on an error answer, in ms);
   * waited out when the error is {@link SluiceError.retriable} (429, 503 and the other 5xx).
   */
  readonly retryAfterMs: number | undefined;
  constructor(
    message: string,
    opts: {
      status?: number;
      registryCode?: number;
      cause?: unknown;
      unreachable?: boolean;
      retryAfterMs?: number | undefined;
    } = {},
  ) {
    const s = opts.status;
    const retriable = opts.unreachable === true || (s !== undefined && (s >= 500 || s === 408 || s === 429));
    super('SLUICE_SCHEMA_REGISTRY', message, { cause: opts.cause, retriable });
    this.status = s;
    this.registryCode = opts.registryCode;
    this.unreachable = opts.unreachable === true;
    this.retryAfterMs = opts.retryAfterMs;
  }
}

/** A user operator threw. Goes to the dead-letter topic under the default policy. */
export class OperatorError extends SluiceError {
  readonly operator: string;
  /** The operator's own error policy (`onError`), when it has one. */
  readonly policy: 'dlq' | 'skip' | 'fail' | undefined;
  constructor(operator: string, cause: unknown, policy?: 'dlq' | 'skip' | 'fail') {
    super(
      'SLUICE_OPERATOR',
      `operator ${operator} failed: ${cause instanceof Error ? cause.message : safeString(cause)}`,
      {
        cause,
      },
    );
    this.operator = operator;
    this.policy = policy;
  }
}

/** Codes of errors made by the user's code or data (or its misuse of the API), not by Sluice. */
const USER_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'SLUICE_SERDE',
  'SLUICE_OPERATOR',
  'SLUICE_TOPOLOGY_INVALID',
]);

/**
 * True for a fault of Sluice or of the machine (a state read that failed or met a closing store,
 * Kafka, a corrupted task), as opposed to an error of the user's code or data (what a user
 * function throws, `SerdeError`, `OperatorError`, an API misuse such as `set(undefined)`). Only
 * the latter may become dead letters: a fault resets the task (or fails the worker), so a failing
 * disk never turns good records into DLQ entries.
 */
export function isSluiceFault(e: unknown): e is SluiceError {
  return e instanceof SluiceError && !USER_CODES.has(e.code);
}

/** `String(v)` that cannot throw (a thrown `Object.create(null)` has no toString). */
export function safeString(v: unknown): string {
  try {
    return String(v);
  } catch {
    return Object.prototype.toString.call(v);
  }
}
