import { loadConfig } from '../config/load.js';
import { ConfigError } from '../errors.js';
import { parseArgs } from './args.js';
import { loadJob } from './load-job.js';
import { withAdmin } from './topics-command.js';
import { COMMAND_USAGE } from './usage.js';

const USAGE = COMMAND_USAGE.group!;

/** `sluice group remove-member`: scale-down of static members without waiting for their session timeout. */
export async function groupCommand(argv: string[]): Promise<number> {
  const args = parseArgs(argv, ['help'], ['instance-id', 'group']);
  const [action, jobFile] = args.positionals;
  if (args.switches.has('help')) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const ids = (args.switches.get('instance-id') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  const groupFlag = args.switches.get('group');
  if (action !== 'remove-member' || (jobFile === undefined) === (groupFlag === undefined)) {
    process.stderr.write(`${USAGE}\n`);
    return 1;
  }
  if (ids.length === 0)
    throw new ConfigError([{ path: 'flag --instance-id', message: 'name at least one id' }], 'command line');
  const config = loadConfig({ file: args.configFile, flags: args.settings });
  const groupId = groupFlag ?? (await loadJob(jobFile!)).id;
  return withAdmin(config, async (admin) => {
    const removed = await admin.removeStaticMembers(groupId, ids);
    let failed = 0;
    for (const m of removed) {
      if (m.error === undefined)
        process.stdout.write(`removed static member ${m.groupInstanceId} from group ${groupId}\n`);
      else {
        failed++;
        process.stderr.write(`could not remove ${m.groupInstanceId} from group ${groupId}: ${m.error}\n`);
      }
    }
    return failed > 0 ? 1 : 0;
  });
}
