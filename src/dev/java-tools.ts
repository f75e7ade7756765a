import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { SluiceError } from '../errors.js';

/**
 * The local broker cannot be run on this machine (no Java, no Maven, or a Java too old for the
 * Kafka version). What to do: point `KAFKA_BROKERS` at an existing cluster, point `KAFKA_HOME` at
 * an unpacked Kafka distribution, or install Java 17 and Maven; `docker/docker-compose.yml` runs a
 * broker in Docker instead.
 */
export class LocalKafkaUnavailableError extends SluiceError {
  constructor(message: string) {
    super('SLUICE_LOCAL_KAFKA_UNAVAILABLE', message);
  }
}

export type ToolName = 'java' | 'mvn';

/**
 * Runs a tool's version command and returns what it printed, or `undefined` when the tool cannot be
 * run. Injectable so tests can pretend a tool is absent.
 */
export type ToolProbe = (tool: ToolName) => Promise<string | undefined>;

/** The java binary: `$JAVA_HOME/bin/java` when JAVA_HOME is set, else `java` from the PATH. */
export function javaCommand(env: NodeJS.ProcessEnv = process.env): string {
  return env.JAVA_HOME ? join(env.JAVA_HOME, 'bin', 'java') : 'java';
}

/** Asks the real `java -version` / `mvn -v`. */
export const systemToolProbe: ToolProbe = async (tool) => {
  const [cmd, args] = tool === 'java' ? [javaCommand(), ['-version']] : ['mvn', ['-v']];
  try {
    const out = await runCommand(cmd, args, { timeoutMs: 30_000 });
    return out.code === 0 ? out.output : undefined;
  } catch {
    return undefined;
  }
};

/**
 * Throws {@link LocalKafkaUnavailableError} unless every tool in `tools` runs, and (when
 * `minJavaMajor` is given) java is at least that version. The message is one sentence naming the
 * three ways out.
 */
export async function ensureTools(
  tools: readonly ToolName[],
  opts: { probe?: ToolProbe; minJavaMajor?: number } = {},
): Promise<void> {
  const probe = opts.probe ?? systemToolProbe;
  const banners = await Promise.all(tools.map(async (tool) => [tool, await probe(tool)] as const));
  const missing = banners.filter(([, banner]) => banner === undefined).map(([tool]) => tool);
  if (missing.length > 0) {
    const what = missing.length === 1 ? `${missing[0]} is` : `${missing.join(' and ')} are`;
    throw new LocalKafkaUnavailableError(
      `Cannot run a local Kafka broker because ${what} not installed: ${WAYS_OUT}`,
    );
  }
  const java = banners.find(([tool]) => tool === 'java')?.[1];
  const major = java === undefined ? undefined : javaMajor(java);
  if (opts.minJavaMajor !== undefined && major !== undefined && major < opts.minJavaMajor) {
    throw new LocalKafkaUnavailableError(
      `Cannot run a local Kafka broker because it needs Java ${opts.minJavaMajor} or newer and java is ` +
        `version ${major}: ${WAYS_OUT}`,
    );
  }
}

const WAYS_OUT =
  'set KAFKA_BROKERS to an existing cluster, set KAFKA_HOME to a Kafka distribution, or install ' +
  'Java 17 and Maven (docker/docker-compose.yml runs a broker in Docker instead).';

/** The major version in a `java -version` banner: `"17.0.15"` → 17, `"1.8.0_402"` → 8. */
export function javaMajor(banner: string): number | undefined {
  const m = /version "(\d+)(?:\.(\d+))?/.exec(banner);
  if (!m) return undefined;
  const first = Number(m[1]);
  return first === 1 && m[2] !== undefined ? Number(m[2]) : first;
}

export interface CommandResult {
  code: number | null;
  /** stdout and stderr interleaved, capped to the last {@link OUTPUT_CAP} characters. */
  output: string;
  stdout: string;
}

/** Enough to show the last screenful of a failed Maven or StorageTool run. */
const OUTPUT_CAP = 64 * 1024;

/** Runs a command to completion, capturing its output. Rejects only when it cannot be started. */
export function runCommand(
  cmd: string,
  args: readonly string[],
  opts: { cwd?: string; timeoutMs?: number } = {},
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: opts.timeoutMs,
    });
    let output = '';
    let stdout = '';
    const keep = (s: string) => (s.length > OUTPUT_CAP ? s.slice(-OUTPUT_CAP) : s);
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout = keep(stdout + d);
      output = keep(output + d);
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      output = keep(output + d);
    });
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, output: stripAnsi(output), stdout: stripAnsi(stdout) }));
  });
}

function stripAnsi(s: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escapes are control characters.
  return s.replace(/\u001b\[[0-9;]*m/g, '');
}

/** The last `n` non-empty lines of `text`. */
export function lastLines(text: string, n: number): string {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .slice(-n)
    .join('\n');
}
