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
  const stateDir = join(config.state.dir, app.id);
  // A stopped static member stays in the group until its session times out: this machine's
  // (the id in its state folder, whose lock no running worker holds) is removed with the rest.
  const stopped = await stoppedInstanceId(stateDir);
  const plan = [
    ...(stopped ? [`static member ${stopped} of the stopped worker of ${stateDir}`] : []),
    `consumer group ${app.id} (committed offsets)`,
    ...internal.map((x) => `topic ${x}`),
    `local state ${stateDir} (on this machine only: run reset on every machine that ran a worker, or delete its folder)`,
  ];
  if (args.switches.get('yes') !== 'true') {
    process.stdout.write(
      `sluice reset would delete:\n${plan.map((p) => `  - ${p}`).join('\n')}\nRun again with --yes to do it (stop every worker first).\n`,
    );
    return 2;
  }
  return withAdmin(config, async (admin) => {
    if (stopped && (await admin.describeGroup(app.id)).members > 0)
      await admin.removeStaticMembers(app.id, [stopped]);
    const g = await admin.describeGroup(app.id);
    if (g.members > 0) {
      process.stderr.write(
        `sluice reset: group ${app.id} still has ${g.members} member(s); stop every worker first. A stopped static member stays a member for kafka.sessionTimeoutMs: wait, or remove it with sluice group remove-member\n`,
      );
      return 1;
    }
    await admin.deleteGroup(app.id);
    await admin.deleteTopics(internal);
    await rm(stateDir, { recursive: true, force: true });
    process.stdout.write(`deleted:\n${plan.map((p) => `  - ${p}`).join('\n')}\n`);
    return 0;
  });
}
