import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** A process started by {@link spawnDetached}. */
export interface DetachedProcess {
  pid: number;
  /** Rejects when the process exits (or cannot be started); never resolves. */
  exited: Promise<never>;
  hasExited: () => boolean;
}

/** The line an appended log gets before each start (what a start failure reports is after it). */
export const START_MARK = '==== started';

/**
 * Starts `cmd` in its own process group with stdout and stderr going to `logFile` (truncated unless
 * `append`) and no pipes back to us, then lets go of it: it keeps running after this Node process
 * exits.
 */
export async function spawnDetached(
  cmd: string,
  args: readonly string[],
  /** `append`: the log keeps what an earlier run wrote (a node restarted after a crash keeps its last lines). */
  opts: { cwd: string; logFile: string; env: NodeJS.ProcessEnv; append?: boolean },
): Promise<DetachedProcess> {
  const out = openSync(opts.logFile, opts.append === true ? 'a' : 'w');
  if (opts.append === true) writeSync(out, `\n${START_MARK} ${new Date().toISOString()} ====\n`);
  let exitedFlag = false;
  try {
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      detached: true,
      stdio: ['ignore', out, out],
      env: opts.env,
    });
    const exited = new Promise<never>((_, reject) => {
      child.once('error', (err) => {
        exitedFlag = true;
        reject(err);
      });
      child.once('exit', (code, signal) => {
        exitedFlag = true;
        reject(new Error(`the process exited with ${signal ?? `code ${code}`}`));
      });
    });
    exited.catch(() => {});
    child.unref();
    if (child.pid === undefined) await exited;
    return { pid: child.pid!, exited, hasExited: () => exitedFlag };
  } finally {
    closeSync(out);
  }
}

/**
 * Alive and not a zombie. A detached broker whose parent is gone is reparented; in a container
 * whose init does not reap, it lingers as a zombie that `kill(pid, 0)` still reports alive.
 */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const afterName = stat.lastIndexOf(')');
    return stat.charAt(afterName + 2) !== 'Z';
  } catch {
    return true;
  }
}

/** The command line of `pid` (arguments joined by spaces), or undefined where /proc is missing. */
export function commandLine(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return undefined;
  }
}

/** Signals the process group of `pid` (all of the broker), falling back to the process alone. */
export function signalGroup(pid: number, signal: NodeJS.Signals): void {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, signal);
      return;
    } catch {}
  }
}

/**
 * Resolves to true once `pid` has exited, false if it is still alive after `timeoutMs`. A process
 * that has exited stays in the process table until its parent reaps it; when the parent is us, Node
 * does that on its event loop, so give it a moment to keep "stopped" meaning "gone" for callers.
 */
export async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid)) {
    if (Date.now() >= deadline) return false;
    await sleep(100);
  }
  const reaped = Date.now() + REAP_GRACE_MS;
  while (exists(pid) && Date.now() < reaped) await sleep(10);
  return true;
}

/** How long {@link waitForExit} waits for an exited process to be reaped before returning anyway. */
const REAP_GRACE_MS = 1_000;

function exists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether something listens on 127.0.0.1:`port`. A Java server on an IPv6 dual-stack socket bound to
 * ::ffff:127.0.0.1 counts: binding the IPv4 address then fails too.
 */
export function portInUse(port: number): Promise<boolean> {
  return new Promise((done) => {
    const server = createServer();
    server.once('error', () => done(true));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => server.close(() => done(false)));
  });
}

/**
 * A free port on 127.0.0.1 below the kernel's ephemeral range (`ip_local_port_range`). It is free
 * when this resolves; another process may take it before the caller binds it. Not a port the OS
 * picks with `listen(0)`: those come from the ephemeral range, where every outgoing connection also
 * takes its local port, so a server started seconds later (a JVM broker) can find its port taken
 * by a client socket (seen as a cluster node exiting during start-up while its peers' controllers
 * kept reconnecting to one another).
 */
export async function freePort(): Promise<number> {
  const [low, high] = belowEphemeral();
  for (let i = 0; i < 200; i++) {
    const port = low + Math.floor(Math.random() * (high - low));
    if (!(await portInUse(port))) return port;
  }
  return osPickedPort();
}

/** Where {@link freePort} looks: [10000, start of the ephemeral range), or the OS's pick when that is empty. */
function belowEphemeral(): [number, number] {
  let ephemeralLow = 32768;
  try {
    const first = Number(
      readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0],
    );
    if (Number.isInteger(first) && first > 0) ephemeralLow = first;
  } catch {}
  const low = 10_000;
  return ephemeralLow - low >= 1000 ? [low, ephemeralLow - 8] : [ephemeralLow, 65_000];
}

async function osPickedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done, fail) => {
    server.once('error', fail);
    server.listen({ port: 0, host: '127.0.0.1', exclusive: true }, done);
  });
  const { port } = server.address() as AddressInfo;
  await new Promise((done) => server.close(done));
  return port;
}

/**
 * A port the OS picked as free whose next port is free too: a local broker's client port, with the
 * controller on the port after it (the default layout). Free when this resolves, as with {@link freePort}.
 *
 * @example
 * const port = await freeBrokerPort();
 * await startLocalKafka({ port }); // controller on port + 1
 */
export async function freeBrokerPort(): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (port < 65535 && !(await portInUse(port + 1))) return port;
  }
}
