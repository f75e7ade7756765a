import { join } from 'node:path';
import { SluiceError, TaskCorruptedError } from '../errors.js';
import type { PartitionReader } from '../kafka/partition-reader.js';
import {
  type ChangelogFingerprint,
  type ChangelogRecordView,
  type CheckpointMeta,
  decodeCheckpointMeta,
  encodeCheckpointMeta,
  fingerprintMismatch,
  fingerprintOf,
} from '../state/checkpoint-meta.js';
import { RocksStore, type WriteOp } from '../state/rocks-store.js';
import { changelogTopic } from '../topology/build.js';
import { RocksTaskState, type StateContext, type StoreInfo } from './rocks-task-state.js';
import type { Task } from './task.js';
import type { TaskState } from './task-state.js';

/** How often a running restore logs its progress. */
const RESTORE_REPORT_MS = 5000;

/** An empty meta entry: a folder that replays every changelog from its start. */
function emptyMeta(): CheckpointMeta {
  return { version: 1, changelogOffsets: {}, writtenAt: 0 };
}

/** Local state that cannot be trusted: RocksDB's own corruption, or a meta entry that does not decode. */
function isCorrupted(e: unknown): boolean {
  return e instanceof SluiceError && e.code === 'SLUICE_TASK_CORRUPTED';
}

/**
 * Opens a task's state and brings it up to date with its changelogs: replay each changelog
 * partition from the offset stored in the meta entry to its end (all of it for a task new to
 * this folder). The folder is wiped and rebuilt from the changelogs, with a warning and
 * `sluice_errors_total{kind="state_corrupted"}`, when it cannot be trusted:
 * - RocksDB reports corruption, or the meta entry does not decode;
 * - a stored offset lies outside the changelog's range (deleted and recreated, or truncated);
 * - the record fingerprinted at the last checkpoint (`changelogLast`) is no longer at its offset
 *   (recreated and grown past the stored offset, e.g. by another owner, or compacted away).
 *
 * A meta entry without fingerprints (written by an older version) keeps the offset check only.
 */
export async function openTaskState(task: Task, ctx: StateContext): Promise<TaskState | undefined> {
  if (task.sub.stores.length === 0) return undefined;
  const dir = join(ctx.config.state.dir, ctx.appId, task.id);
  const stores = new Map<string, StoreInfo>();
  for (const spec of task.sub.stores) {
    // A map's or list's store holds one entry per map key or element: the serde is an entry's.
    stores.set(spec.name, {
      spec,
      changelog: changelogTopic(ctx.appId, spec.name),
      serde: spec.descriptor.serde,
    });
  }
  const started = Date.now();
  const admin = await ctx.client.admin();
  const reader = ctx.client.partitionReader();
  // The range to replay of each changelog partition, read now: after the task's fence (its
  // producer is made first), so no earlier owner can add to it. The end is the high watermark
  // (read uncommitted), which the replay must reach; the admin's offsets are the last stable
  // offset, which an open transaction would hold back. Exactly-once v2 has no per-task fence: a
  // frozen earlier owner's transaction may still be open here, and can no longer commit (the
  // group refuses its offsets); the replay waits until the coordinator aborts it (10 s timeout).
  const ranges = new Map<string, { low: bigint; high: bigint }>();
  try {
    for (const [name, info] of stores) {
      const p = (await admin.offsets(info.changelog)).find((x) => x.partition === task.partition);
      if (!p)
        throw new TaskCorruptedError(
          task.id,
          `changelog ${info.changelog} has no partition ${task.partition}`,
        );
      ranges.set(name, await reader.endOffsets(info.changelog, task.partition));
    }
  } catch (e) {
    await reader.close().catch(() => undefined);
    throw e;
  }

  const storage = ctx.storage ?? RocksStore;
  const open = () => storage.open({ dir, stores: [...stores.keys()], taskId: task.id });
  /** Logs why, counts it, and leaves an empty folder to restore into. */
  const wipe = async (current: RocksStore | undefined, why: Record<string, unknown>): Promise<RocksStore> => {
    ctx.logger.warn(
      why,
      'local state does not match its changelog or cannot be read; wiping it and restoring from the changelog',
    );
    ctx.metrics.errors.inc({ app: ctx.appId, kind: 'state_corrupted' });
    await current?.close();
    await storage.destroy(dir);
    return open();
  };

  let rocks: RocksStore;
  try {
    rocks = await open();
  } catch (e) {
    if (!isCorrupted(e)) {
      await reader.close().catch(() => undefined);
      throw e;
    }
    rocks = await wipe(undefined, { err: e }).catch(async (e2) => {
      await reader.close().catch(() => undefined);
      throw e2;
    });
  }
  let total = 0;
  let meta: CheckpointMeta;
  try {
    try {
      const metaBytes = rocks.readMeta();
      meta = metaBytes ? decodeCheckpointMeta(metaBytes) : emptyMeta();
    } catch (e) {
      if (!isCorrupted(e)) throw e;
      rocks = await wipe(rocks, { err: e });
      meta = emptyMeta();
    }
    const why = await changelogMismatch(meta, stores, ranges, reader, task.partition);
    if (why) {
      rocks = await wipe(rocks, why);
      meta = emptyMeta();
    }
    meta.changelogLast = { ...meta.changelogLast };
    const changelogLast = meta.changelogLast;

    // Replay.
    let remaining = 0n;
    for (const [name, r] of ranges) {
      const from = meta.changelogOffsets[name] !== undefined ? BigInt(meta.changelogOffsets[name]!) : r.low;
      remaining += r.high - from;
    }
    ctx.metrics.restoreRemaining.set({ app: ctx.appId, task: task.id }, Number(remaining));
    // Every store gets its series, also when nothing is left to replay.
    for (const name of stores.keys()) ctx.metrics.restoreRecords.inc({ app: ctx.appId, store: name }, 0);
    task.restoreProgress = { total: Number(remaining), remaining: Number(remaining) };
    if (remaining > 0n)
      ctx.logger.info(
        { toReplay: Number(remaining), stores: [...stores.keys()] },
        'restoring state from changelog',
      );
    // A long restore says how far it is, every few seconds.
    let nextReport = Date.now() + RESTORE_REPORT_MS;
    for (const [name, info] of stores) {
      const r = ranges.get(name)!;
      const from = meta.changelogOffsets[name] !== undefined ? BigInt(meta.changelogOffsets[name]!) : r.low;
      if (from >= r.high) {
        meta.changelogOffsets[name] = r.high.toString();
        continue;
      }
      let n = 0;
      let lastRecord: ChangelogRecordView | undefined;
      await reader.read({
        topic: info.changelog,
        partition: task.partition,
        from,
        to: r.high,
        signal: task.closeSignal,
        onRecords: (records) => {
          const ops: WriteOp[] = records.map((rec) => ({
            store: name,
            key: rec.key ?? Buffer.alloc(0),
            value: rec.value,
          }));
          rocks.writeSync(ops);
          lastRecord = records[records.length - 1];
          n += records.length;
          remaining -= BigInt(records.length);
          const left = Number(remaining > 0n ? remaining : 0n);
          if (task.restoreProgress) task.restoreProgress.remaining = left;
          ctx.metrics.restoreRemaining.set({ app: ctx.appId, task: task.id }, left);
          if (Date.now() >= nextReport) {
            nextReport = Date.now() + RESTORE_REPORT_MS;
            const seconds = (Date.now() - started) / 1000;
            ctx.logger.info(
              {
                replayed: total + n,
                remaining: left,
                perSecond: Math.round((total + n) / seconds),
              },
              'restoring state from changelog',
            );
          }
        },
      });
      // The fingerprint of the last record replayed (hashed once, not per batch).
      if (lastRecord) changelogLast[name] = fingerprintOf(lastRecord);
      total += n;
      ctx.metrics.restoreRecords.inc({ app: ctx.appId, store: name }, n);
      meta.changelogOffsets[name] = r.high.toString();
    }
    meta = { ...meta, writtenAt: Date.now() };
    rocks.writeSync([], encodeCheckpointMeta(meta));
  } catch (e) {
    await rocks.close().catch(() => undefined);
    if (task.closeSignal?.aborted) ctx.metrics.restoreRemaining.remove({ app: ctx.appId, task: task.id });
    throw e;
  } finally {
    await reader.close().catch(() => undefined);
  }
  const seconds = (Date.now() - started) / 1000;
  ctx.metrics.restoreDuration.observe({ app: ctx.appId }, seconds);
  ctx.metrics.restoreRemaining.set({ app: ctx.appId, task: task.id }, 0);
  if (task.restoreProgress) task.restoreProgress.remaining = 0;
  ctx.logger.info(
    { restored: total, seconds, stores: [...stores.keys()] },
    total > 0 ? 'state restored from changelog' : 'state up to date',
  );
  const opened = new RocksTaskState(rocks, stores, meta, ctx, task);
  opened.refreshStoreSize();
  return opened;
}

/**
 * Why the local folder does not belong to the changelogs as they are now, or undefined when
 * every store's stored offset lies within its changelog's range and its fingerprinted record
 * (when the meta entry has one) is still at its offset.
 */
async function changelogMismatch(
  meta: CheckpointMeta,
  stores: ReadonlyMap<string, StoreInfo>,
  ranges: ReadonlyMap<string, { low: bigint; high: bigint }>,
  reader: PartitionReader,
  partition: number,
): Promise<Record<string, unknown> | undefined> {
  for (const [name, r] of ranges) {
    const stored = meta.changelogOffsets[name];
    if (stored === undefined) continue;
    const off = BigInt(stored);
    const range = { store: name, stored, low: r.low.toString(), high: r.high.toString() };
    if (off > r.high || off < r.low)
      return { ...range, reason: 'stored offset outside the changelog (deleted and recreated?)' };
    const fp: ChangelogFingerprint | undefined = meta.changelogLast?.[name];
    if (fp === undefined) continue;
    const at = BigInt(fp.offset);
    let found: ChangelogRecordView | undefined;
    if (at >= r.low && at < r.high) {
      await reader.read({
        topic: stores.get(name)!.changelog,
        partition,
        from: at,
        to: at + 1n,
        onRecords: (records) => {
          found ??= records[0];
        },
      });
    }
    const reason = fingerprintMismatch(fp, found);
    if (reason) return { ...range, reason: `last checkpoint's changelog record differs: ${reason}` };
  }
  return undefined;
}
