/**
 * `npx sluice run job.ts` runs the worker as npm's grandchild: npm → `sh -c sluice …` → node. On
 * SIGTERM npm signals the shell and exits at once; the shell dies without passing the signal on,
 * and the worker would keep running as an orphan. So a worker started by npm (npm sets
 * `npm_command` to exec for `npm exec`/`npx`, run or start for scripts) watches its parent and
 * shuts down gracefully, as on SIGTERM, when the parent is gone. Elsewhere (a shell, nohup, a
 * container's PID 1, a supervisor) the parent's exit means nothing and nothing is watched.
 */
/** npm's `npm_command` values that run a worker under `sh -c` (`npm test` is the test runner's). */
const NPM_LAUNCHERS = new Set(['exec', 'run', 'run-script', 'start', 'restart']);

export function stopWhenLauncherExits(
  onExit: () => void,
  opts: { env?: NodeJS.ProcessEnv; intervalMs?: number } = {},
): () => void {
  const env = opts.env ?? process.env;
  if (!NPM_LAUNCHERS.has(env.npm_command ?? '')) return () => undefined;
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    onExit();
  }, opts.intervalMs ?? 250);
  timer.unref();
  return () => clearInterval(timer);
}
