/**
 * An exclusive, named lock on a task's state folder: `<dir>/.lock`, created with O_EXCL and
 * holding the owner's pid, host and process start time.
 *
 * RocksDB's own `LOCK` (an fcntl lock the kernel drops when the process dies) is what keeps two
 * processes from opening one database; it is the safety net, including for the rare race in which
 * two processes take over the same stale lock file at once. This file is there for the operator:
 * a second owner fails with "locked by pid 4242 on host-a since ..." instead of "IO error: lock".
 *
 * A lock file is stale, and is taken over, when its owner is provably gone:
 * - its pid is not running on this host (`kill(pid, 0)` answers ESRCH);
 * - its pid is running but started at another time (the pid was reused; Linux `/proc` only);
 * - its pid is ours but this process does not hold the folder (a restarted container in which
 *   the worker is pid 1 again);
 * - it names another host (a recreated container on the same volume): we cannot probe it, and
 *   RocksDB's LOCK still refuses a live owner on the same kernel.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { StateLockedError, toStateError } from './errors.js';

export const LOCK_FILE = '.lock';

/** A held lock; release it exactly once, after the database is closed. */
export interface DirLock {
  readonly dir: string;
  release(): void;
}

interface LockOwner {
  pid: number;
  hostname: string;
  /** Process start time in clock ticks since boot (`/proc/<pid>/stat` field 22); Linux only. */
  procStart?: string;
  since: string;
  token: string;
}

/** Folders held by this process, by resolved path. */
const heldHere = new Map<string, string>();

/** Partially written lock files (another process between open and write) get this long to fill in. */
const UNREADABLE_GRACE_MS = 2_000;
const UNREADABLE_POLL_MS = 25;

/**
 * Takes the lock on `dir` (which must exist).
 *
 * @throws StateLockedError when a live owner holds it, or this process holds it already.
 * @example
 * const lock = await acquireDirLock('/var/lib/sluice/app/0_3');
 * try { ... } finally { lock.release(); }
 */
export async function acquireDirLock(dir: string): Promise<DirLock> {
  const key = resolve(dir);
  if (heldHere.has(key)) {
    throw new StateLockedError(dir, process.pid, `this process (pid ${process.pid}) has it open already`);
  }
  const path = join(dir, LOCK_FILE);
  const me: LockOwner = {
    pid: process.pid,
    hostname: hostname(),
    procStart: procStartOf(process.pid),
    since: new Date().toISOString(),
    token: randomBytes(8).toString('hex'),
  };
  const deadline = Date.now() + UNREADABLE_GRACE_MS;
  for (;;) {
    if (tryCreate(path, me, dir)) break;
    const text = readLockFile(path, dir);
    if (text === undefined) continue; // vanished between our attempts: try again
    const owner = parseOwner(text);
    if (owner === undefined) {
      // Empty or half-written: either a creator is between open() and write(), or a crash left
      // it torn. Give a live creator a moment, then treat it as stale.
      if (Date.now() < deadline) {
        await sleep(UNREADABLE_POLL_MS);
        continue;
      }
    } else if (isAlive(owner)) {
      throw new StateLockedError(
        dir,
        owner.pid,
        `owned by process ${owner.pid} on ${owner.hostname} since ${owner.since}; ` +
          `if that process is gone, delete ${path}`,
      );
    }
    removeIfSame(path, text, dir);
  }
  heldHere.set(key, me.token);
  let released = false;
  return {
    dir,
    release() {
      if (released) return;
      released = true;
      heldHere.delete(key);
      const text = readLockFile(path, dir);
      if (text !== undefined && parseOwner(text)?.token === me.token) removeIfSame(path, text, dir);
    },
  };
}

/** Whether this process holds `dir` (for tests and diagnostics). */
export function isHeldHere(dir: string): boolean {
  return heldHere.has(resolve(dir));
}

function tryCreate(path: string, me: LockOwner, dir: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'wx', 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw toStateError(err, dir, 'lock');
  }
  try {
    writeSync(fd, JSON.stringify(me));
  } catch (err) {
    closeSync(fd);
    rmSync(path, { force: true });
    throw toStateError(err, dir, 'lock');
  }
  closeSync(fd);
  return true;
}

function readLockFile(path: string, dir: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw toStateError(err, dir, 'lock');
  }
}

/** Removes the lock file unless someone replaced it since we read `text`. */
function removeIfSame(path: string, text: string, dir: string): void {
  // Not atomic (there is no compare-and-delete on a path); RocksDB's LOCK covers the race.
  if (readLockFile(path, dir) !== text) return;
  rmSync(path, { force: true });
}

function parseOwner(text: string): LockOwner | undefined {
  try {
    const o = JSON.parse(text) as Partial<LockOwner>;
    if (typeof o.pid !== 'number' || !Number.isInteger(o.pid) || o.pid <= 0) return undefined;
    return {
      pid: o.pid,
      hostname: typeof o.hostname === 'string' ? o.hostname : '?',
      procStart: typeof o.procStart === 'string' ? o.procStart : undefined,
      since: typeof o.since === 'string' ? o.since : '?',
      token: typeof o.token === 'string' ? o.token : '',
    };
  } catch {
    return undefined;
  }
}

function isAlive(owner: LockOwner): boolean {
  if (owner.hostname !== hostname()) return false;
  if (owner.pid === process.pid) return false; // we would be in heldHere if we held it
  try {
    process.kill(owner.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  if (owner.procStart !== undefined) {
    const now = procStartOf(owner.pid);
    if (now !== undefined && now !== owner.procStart) return false;
  }
  return true;
}

function procStartOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 2 (comm) may contain spaces and parentheses; fields after the last ')' are fixed.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return rest[19]; // field 22 overall: starttime
  } catch {
    return undefined;
  }
}
