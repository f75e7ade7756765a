import { TaskCorruptedError } from '../errors.js';
import type { TaskManager, WorkerParts } from './task-manager.js';
import { type PartitionPlan, prepareTopics } from './topics.js';

/** How often a worker with stateful tasks checks that their changelogs still exist. */
const CHANGELOG_CHECK_MS = 2000;

export interface ChangelogWatchDeps extends WorkerParts {
  tasks: TaskManager;
  /** The partition plan of the topics prepared again. */
  setPlan: (plan: PartitionPlan) => void;
}

/**
 * Notices a changelog deleted under running tasks (kafkajs would retry their transactions for
 * a long time, silently). The state it backed now exists only in the local folders, and no
 * longer matches any changelog: as Kafka Streams does with a corrupted task, the changelog is
 * recreated (empty) and each affected task is reset, which wipes its folder (the stored offset
 * lies past the new changelog's end) and rebuilds the state from what the changelog holds.
 * Logged as an error and counted as `sluice_errors_total{kind="state_corrupted"}`.
 */
export class ChangelogWatch {
  readonly #d: ChangelogWatchDeps;
  #timer: NodeJS.Timeout | undefined;
  #checking = false;

  constructor(deps: ChangelogWatchDeps) {
    this.#d = deps;
  }

  /** Checks every few seconds, when the topology has stores. */
  start(): void {
    if (this.#d.topology.stores.length === 0) return;
    this.#timer = setInterval(() => void this.check(), CHANGELOG_CHECK_MS);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
  }

  async check(): Promise<void> {
    const { appId, topology, client, logger, metrics, tasks: manager } = this.#d;
    if (this.#checking || !this.#d.isRunning()) return;
    const stateful = [...manager.tasks.values()].filter(
      (t) => t.sub.stores.length > 0 && t.state !== 'closed',
    );
    if (stateful.length === 0) return;
    this.#checking = true;
    try {
      const admin = await client.admin();
      const existing = new Set(await admin.listTopics());
      const missing = topology.stores.filter((s) => !existing.has(s.changelog));
      if (missing.length === 0 || !this.#d.isRunning()) return;
      const gone = new Set(missing.map((s) => s.name));
      const tasks = stateful.filter((t) => t.sub.stores.some((s) => gone.has(s.name)));
      metrics.errors.inc({ app: appId, kind: 'state_corrupted' });
      logger.error(
        { changelogs: missing.map((s) => s.changelog), tasks: tasks.map((t) => t.id) },
        'changelog deleted while its tasks ran: recreating it; their state is rebuilt from it (what it does not hold is lost)',
      );
      await client.renewAdmin();
      this.#d.setPlan(
        await prepareTopics(await client.admin(), topology, {
          overflow: this.#d.config.overload.mode === 'divert',
          replicationFactor: this.#d.config.kafka.replicationFactor,
        }),
      );
      for (const task of tasks) {
        if (!manager.owns(task)) continue;
        const reason = new TaskCorruptedError(
          task.id,
          `changelog deleted: ${missing.map((s) => s.changelog).join(', ')}`,
        );
        task.reset(reason).catch((e) => manager.retryTask(task, 1, e));
      }
    } catch (e) {
      logger.warn({ err: e }, 'cannot check that the changelogs exist');
    } finally {
      this.#checking = false;
    }
  }
}
