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

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, 25));
  }
  return cond();
}

test('a worker launched by npm exec should stop when its launcher shell is SIGTERMed', async () => {
  const { sh, lines } = underShell('exec');
  assert.ok(await until(() => lines.length > 0, 10_000), 'the child printed its pid');
  const pid = Number(lines[0]);
  sh.kill('SIGTERM');
  await once(sh, 'exit');
  assert.ok(await until(() => !alive(pid), 5_000), `child ${pid} still running after its launcher died`);
});

test('a process not launched by npm should outlive its parent (nohup-style)', async (t) => {
  const { sh, lines } = underShell(undefined);
  assert.ok(await until(() => lines.length > 0, 10_000), 'the child printed its pid');
  const pid = Number(lines[0]);
  t.after(() => {
    if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  sh.kill('SIGTERM');
  await once(sh, 'exit');
  await new Promise((r) => setTimeout(r, 500));
  assert.ok(alive(pid), 'the child was stopped although npm did not launch it');
  assert.ok(!lines.includes('stopped'));
});
