/**
 * The orphan of `npx sluice run` on SIGTERM, without npm: a shell that does not exec its command
 * (`sh -c 'node child; true'`, like npm's) is SIGTERMed and dies; the node child must notice that
 * its launcher is gone and stop, but only when npm launched it.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isAlive } from '../../../src/dev/broker-process.js';
import { eventually } from '../../helpers/kafka.js';

const WATCH = fileURLToPath(new URL('../../../src/cli/launcher-watch.js', import.meta.url));

/** A node process under `sh -c`: it prints its pid, then "stopped" when the watch fires. */
function underShell(npmCommand: string | undefined) {
  const code = `import(${JSON.stringify(WATCH)}).then(({ stopWhenLauncherExits }) => {
    stopWhenLauncherExits(() => { console.log('stopped'); process.exit(0); }, { intervalMs: 50 });
    console.log(process.pid);
    setInterval(() => {}, 1000);
  });`;
  const env = { ...process.env };
  delete env.npm_command;
  if (npmCommand !== undefined) env.npm_command = npmCommand;
  const sh = spawn('sh', ['-c', `"${process.execPath}" -e '${code.replace(/'/g, `'\\''`)}'; true`], {
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines: string[] = [];
  let buf = '';
  sh.stdout.on('data', (d) => {
    buf += d;
    const parts = buf.split('\n');
    buf = parts.pop()!;
    lines.push(...parts);
  });
  return { sh, lines };
}

test('a worker launched by npm exec should stop when its launcher shell is SIGTERMed', async () => {
  const { sh, lines } = underShell('exec');
  await eventually(() => lines.length > 0, { timeoutMs: 10_000, intervalMs: 25, what: 'the child pid' });
  const pid = Number(lines[0]);
  sh.kill('SIGTERM');
  await once(sh, 'exit');
  await eventually(() => !isAlive(pid), {
    timeoutMs: 5_000,
    intervalMs: 25,
    what: `child ${pid} to stop after its launcher died`,
  });
});

test('a process not launched by npm should outlive its parent (nohup-style)', async (t) => {
  const { sh, lines } = underShell(undefined);
  await eventually(() => lines.length > 0, { timeoutMs: 10_000, intervalMs: 25, what: 'the child pid' });
  const pid = Number(lines[0]);
  t.after(() => {
    if (isAlive(pid)) process.kill(pid, 'SIGKILL');
  });
  sh.kill('SIGTERM');
  await once(sh, 'exit');
  await new Promise((r) => setTimeout(r, 500));
  assert.ok(isAlive(pid), 'the child was stopped although npm did not launch it');
  assert.ok(!lines.includes('stopped'));
});
