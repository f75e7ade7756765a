/**
 * The worker's KIP-345 `group.instance.id`: who it is in the consumer group across restarts.
 *
 * - `kafka.staticMembership: false`: none (a dynamic member, as before).
 * - `kafka.groupInstanceId` set (in Kubernetes, the pod name of a StatefulSet): that.
 * - Otherwise an id made once, `<hostname>-<12 hex digits>`, kept in `<state.dir>/<appId>/instance-id`
 *   and read back on every start: a worker restarted on the same folder is the same member, and gets
 *   its tasks (whose RocksDB folders are there too) back without a rebalance.
 *
 * Two live workers on one folder would share the id and fence each other, so a worker holds the
 * app folder's lock (`<state.dir>/<appId>/.lock`, see src/state/dir-lock.ts) for as long as it
 * uses the stored id. A second worker on the same folder joins with an id of its own for this run
 * only (logged), and leaves the group when it stops, since no restart will come back as it.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { GROUP_INSTANCE_ID_PATTERN, type SluiceConfig } from '../config/schema.js';
import type { Logger } from '../ops/logger.js';
import { acquireDirLock, type DirLock } from '../state/dir-lock.js';
import { StateLockedError } from '../state/errors.js';

export const INSTANCE_ID_FILE = 'instance-id';

export interface GroupInstance {
  id: string;
  /** Where it came from: the config, the state folder (read or created), or this run only. */
  source: 'config' | 'file' | 'created' | 'ephemeral';
  /** True for an id no restart will reuse: such a member should leave the group when it stops. */
  ephemeral: boolean;
  /** Releases the app folder's lock (a no-op when none was taken). */
  release(): void;
}

/** A new id: this machine's name (made legal) and 48 random bits. */
export function newInstanceId(host: string = hostname()): string {
  const name =
    host
      .replace(/[^A-Za-z0-9._-]/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 200) || 'sluice';
  return `${name}-${randomBytes(6).toString('hex')}`;
}

/**
 * The id stored in `appDir` (created with it when absent or unusable). Written to a temporary file
 * and renamed, so a crash never leaves a torn id behind.
 */
export function readOrCreateInstanceId(appDir: string): { id: string; created: boolean } {
  const path = join(appDir, INSTANCE_ID_FILE);
  try {
    const id = readFileSync(path, 'utf8').trim();
    if (GROUP_INSTANCE_ID_PATTERN.test(id)) return { id, created: false };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  mkdirSync(appDir, { recursive: true });
  const id = newInstanceId();
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${id}\n`, { mode: 0o644 });
  renameSync(tmp, path);
  return { id, created: true };
}

/**
 * The instance id stored in `appDir` when no running worker holds that folder (so its member, if
 * the group still lists it, is a stopped one); undefined when there is none or a worker runs.
 */
export async function stoppedInstanceId(appDir: string): Promise<string | undefined> {
  let id: string;
  try {
    id = readFileSync(join(appDir, INSTANCE_ID_FILE), 'utf8').trim();
  } catch {
    return undefined;
  }
  if (!GROUP_INSTANCE_ID_PATTERN.test(id)) return undefined;
  try {
    (await acquireDirLock(appDir)).release();
  } catch (e) {
    if (e instanceof StateLockedError) return undefined;
    throw e;
  }
  return id;
}

/** Works out the worker's instance id (see the module comment); undefined: a dynamic member. */
export async function claimGroupInstance(
  config: Readonly<SluiceConfig>,
  appId: string,
  logger: Logger,
): Promise<GroupInstance | undefined> {
  const k = config.kafka;
  if (!k.staticMembership) return undefined;
  const none = () => undefined;
  if (k.groupInstanceId !== undefined)
    return { id: k.groupInstanceId, source: 'config', ephemeral: false, release: none };
  const appDir = join(config.state.dir, appId);
  mkdirSync(appDir, { recursive: true });
  let lock: DirLock;
  try {
    lock = await acquireDirLock(appDir);
  } catch (e) {
    if (!(e instanceof StateLockedError)) throw e;
    const id = newInstanceId();
    logger.warn(
      { dir: appDir, groupInstanceId: id, reason: e.message },
      'another worker uses this state folder and its group.instance.id: this one joins under its own id for this run, and leaves the group when it stops (give each worker its own state.dir to keep its tasks across restarts)',
    );
    return { id, source: 'ephemeral', ephemeral: true, release: none };
  }
  try {
    const { id, created } = readOrCreateInstanceId(appDir);
    return { id, source: created ? 'created' : 'file', ephemeral: false, release: () => lock.release() };
  } catch (e) {
    lock.release();
    throw e;
  }
}
