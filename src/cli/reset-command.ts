import { existsSync, readdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { loadConfig } from '../config/load.js';
import { stoppedInstanceId } from '../runtime/instance-id.js';
import { topologyTopic } from '../runtime/topics.js';
import { parseArgs } from './args.js';
import { loadJob } from './load-job.js';
import { withAdmin } from './topics-command.js';
import { UsageError } from './usage.js';

/**
 * `sluice reset <job> --yes`: like Kafka Streams' application reset tool. Deletes the group's
 * committed offsets (the app reads its inputs from the beginning again), its internal topics
 * (repartition and changelog topics, the recorded topology) and this machine's local state. Output topics and the
 * dead-letter topic hold data and are left alone. Run it with every worker stopped.
 */
export async function resetCommand(argv: string[]): Promise<number> {
  const args = parseArgs(argv, ['yes']);
  const jobFile = args.positionals[0];
  if (!jobFile) throw new UsageError('reset needs a job file', 'reset');
  const config = loadConfig({ file: args.configFile, flags: args.settings });
  const app = await loadJob(jobFile);
  const t = app.topology();
  const internal = [
    ...t.repartitionTopics.keys(),
    ...t.stores.map((s) => s.changelog),
    topologyTopic(app.id),
  ];
  // The app's folder, and those of stream threads past the first (`<state.dir>/thread-<i>/<appId>`).
  const stateDirs = [config.state.dir, ...threadDirs(config.state.dir)]
    .map((d) => join(d, app.id))
    .filter((d, i) => i === 0 || existsSync(d));
  // A stopped static member stays in the group until its session times out: this machine's
  // (the id in its state folder, whose lock no running worker holds) is removed with the rest.
  const stopped: Array<{ id: string; dir: string }> = [];
  for (const dir of stateDirs) {
    const id = await stoppedInstanceId(dir);
    if (id) stopped.push({ id, dir });
  }
  const plan = [
    ...stopped.map((s) => `static member ${s.id} of the stopped worker of ${s.dir}`),
    `consumer group ${app.id} (committed offsets)`,
    ...internal.map((x) => `topic ${x}`),
    ...stateDirs.map(
      (d) =>
        `local state ${d} (on this machine only: run reset on every machine that ran a worker, or delete its folder)`,
    ),
  ];
  if (args.switches.get('yes') !== 'true') {
    process.stdout.write(
      `sluice reset would delete:\n${plan.map((p) => `  - ${p}`).join('\n')}\nRun again with --yes to do it (stop every worker first).\n`,
    );
    return 2;
  }
  return withAdmin(config, async (admin) => {
    if (stopped.length > 0 && (await admin.describeGroup(app.id)).members > 0)
      await admin.removeStaticMembers(
        app.id,
        stopped.map((s) => s.id),
      );
    const g = await admin.describeGroup(app.id);
    if (g.members > 0) {
      process.stderr.write(
        `sluice reset: group ${app.id} still has ${g.members} member(s); stop every worker first. A stopped static member stays a member for kafka.sessionTimeoutMs: wait, or remove it with sluice group remove-member\n`,
      );
      return 1;
    }
    await admin.deleteGroup(app.id);
    await admin.deleteTopics(internal);
    for (const d of stateDirs) await rm(d, { recursive: true, force: true });
    process.stdout.write(`deleted:\n${plan.map((p) => `  - ${p}`).join('\n')}\n`);
    return 0;
  });
}

/** The folders of stream threads past the first in `dir` (processing.threads, thread-config.ts). */
function threadDirs(dir: string): string[] {
  try {
    return readdirSync(dir)
      .filter((e) => /^thread-\d+$/.test(e))
      .map((e) => join(dir, e));
  } catch {
    return [];
  }
}
