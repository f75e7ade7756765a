import { SluiceError, TaskCorruptedError } from '../errors.js';
import { unwrapRawError } from './rocks-binding.js';

/**
 * Another owner holds the task's state folder: a live process on this machine (named by pid), or
 * a store still open in this process (a task closed and reassigned before its close finished).
 *
 * Retriable: during a rebalance the previous owner is usually closing the task; retry the task's
 * recovery with backoff. If it persists, the named process really owns the folder; stop it, or
 * give each worker on the machine its own `stateDir`.
 */
export class StateLockedError extends SluiceError {
  readonly dir: string;
  /** The owner's pid, when known. */
  readonly ownerPid: number | undefined;

  constructor(dir: string, ownerPid: number | undefined, detail: string, cause?: unknown) {
    super('SLUICE_STATE_LOCKED', `state folder ${dir} is locked: ${detail}`, { cause, retriable: true });
    this.dir = dir;
    this.ownerPid = ownerPid;
  }
}

/**
 * Reading or writing a task's local state failed (disk full, I/O error, store closed).
 *
 * Retriable: close the task and rebuild it; local state is a cache of the changelog, so nothing
 * committed is lost. When `diskFull` is set, free space under the state folder (or point
 * `stateDir` at a larger volume): RocksDB refuses writes until it is reopened with room to spare.
 */
export class StateIoError extends SluiceError {
  readonly dir: string;
  /** What we were doing: `open`, `read`, `write`, `scan`, `clear`, `close`, `wipe`. */
  readonly op: string;
  readonly diskFull: boolean;

  constructor(dir: string, op: string, message: string, opts: { cause?: unknown; diskFull?: boolean } = {}) {
    super('SLUICE_STATE_IO', message, { cause: opts.cause, retriable: true });
    this.dir = dir;
    this.op = op;
    this.diskFull = opts.diskFull ?? false;
  }
}

/**
 * A stored checkpoint meta entry cannot be decoded (written by another version, or damaged).
 * The task's local state cannot be trusted: wipe the folder and restore it from the changelogs.
 */
export class CheckpointMetaError extends SluiceError {
  constructor(reason: string) {
    super('SLUICE_TASK_CORRUPTED', `invalid checkpoint meta entry: ${reason}`, { retriable: true });
  }
}

const DISK_FULL = /No space left on device|ENOSPC|quota exceeded|EDQUOT/i;

/**
 * Maps an error thrown by the RocksDB binding (or by `node:fs` on the state folder) to the error
 * the runtime acts on: {@link StateLockedError}, {@link TaskCorruptedError}, or
 * {@link StateIoError} naming the folder and the operation.
 */
export function toStateError(err: unknown, dir: string, op: string, taskId?: string): SluiceError {
  if (err instanceof SluiceError) return err;
  const e = unwrapRawError(err);
  const message = e instanceof Error ? e.message : String(e);
  const code = typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
  if (code === 'LEVEL_LOCKED') {
    return new StateLockedError(
      dir,
      undefined,
      `RocksDB's LOCK is held by another process (${message})`,
      err,
    );
  }
  if (code === 'LEVEL_CORRUPTION') {
    return new TaskCorruptedError(
      taskId ?? dir,
      `RocksDB reports corruption in ${dir} during ${op}: ${message}`,
    );
  }
  if (DISK_FULL.test(message) || code === 'ENOSPC' || code === 'EDQUOT') {
    return new StateIoError(
      dir,
      op,
      `disk full: no space left for state folder ${dir} during ${op} (${message}); free space or move stateDir`,
      { cause: err, diskFull: true },
    );
  }
  const kind =
    code === 'LEVEL_IO_ERROR' || (typeof code === 'string' && code.startsWith('E')) ? 'I/O error' : 'error';
  return new StateIoError(dir, op, `state ${kind} in ${dir} during ${op}: ${message}`, { cause: err });
}
