import { ConfigError, type ConfigProblem } from '../errors.js';

/** Short flags and the config paths they stand for. */
const ALIASES: Record<string, string> = {
  brokers: 'kafka.brokers',
  guarantee: 'processing.guarantee',
  'state-dir': 'state.dir',
  'http-port': 'http.port',
  'http-host': 'http.host',
  'log-level': 'log.level',
  'log-format': 'log.format',
};

export interface ParsedArgs {
  positionals: string[];
  configFile?: string;
  /** Config settings from flags, as [path, value]. */
  settings: Array<[string, string]>;
  /**
   * Flags that are not config settings: switches (e.g. --yes, 'true' when given bare) and the
   * command's own options with a value (e.g. --partitions 4).
   */
  switches: Map<string, string>;
}

/**
 * Parses `--a.b.c value`, `--a.b.c=value`, aliases (`--brokers`), `--config file`, known
 * switches and known options (a command's own flags that take a value). Every other flag is a
 * config setting, checked against the schema when the config loads. Missing values are collected
 * as problems (all of them, not the first).
 */
export function parseArgs(
  argv: readonly string[],
  knownSwitches: readonly string[] = [],
  knownOptions: readonly string[] = [],
): ParsedArgs {
  const out: ParsedArgs = { positionals: [], settings: [], switches: new Map() };
  const problems: ConfigProblem[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith('--')) {
      out.positionals.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = eq >= 0 ? a.slice(2, eq) : a.slice(2);
    const inline = eq >= 0 ? a.slice(eq + 1) : undefined;
    if (knownSwitches.includes(name)) {
      out.switches.set(name, inline ?? 'true');
      continue;
    }
    const takeValue = (): string | undefined => {
      if (inline !== undefined) return inline;
      const v = argv[i + 1];
      if (v === undefined || v.startsWith('--')) {
        problems.push({ path: `flag --${name}`, message: 'needs a value' });
        return undefined;
      }
      i++;
      return v;
    };
    if (name === 'config' || name === 'c') {
      const v = takeValue();
      if (v !== undefined) out.configFile = v;
      continue;
    }
    if (knownOptions.includes(name)) {
      const v = takeValue();
      if (v !== undefined) out.switches.set(name, v);
      continue;
    }
    const path = ALIASES[name] ?? name;
    const v = takeValue();
    if (v !== undefined) out.settings.push([path, v]);
  }
  if (problems.length > 0) throw new ConfigError(problems, 'command line');
  return out;
}
