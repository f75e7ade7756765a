import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { ConfigError, type ConfigProblem } from '../errors.js';
import { didYouMean } from '../suggest.js';
import {
  configLeaves,
  configSchema,
  envNameOf,
  type Leaf,
  type SluiceConfig,
  type SluiceConfigInput,
} from './schema.js';

/** Env variables that start with SLUICE_ but are not config keys (read by other parts). */
const RESERVED_ENV = new Set(['SLUICE_KAFKA_VERSION', 'SLUICE_CONFIG', 'SLUICE_TEST_KAFKA_PORT_BASE']);

export interface LoadConfigOptions {
  /** Path of a YAML (or JSON) file; `SLUICE_CONFIG` is used when absent. */
  file?: string | undefined;
  /** The process environment (defaults to process.env). */
  env?: NodeJS.ProcessEnv;
  /** Flags as `path=value` pairs already split by the CLI: `[['processing.guarantee', 'at_least_once']]`. */
  flags?: ReadonlyArray<readonly [string, string]>;
  /** Values set in code (lowest precedence after defaults). */
  overrides?: SluiceConfigInput;
}

function coerce(leaf: Leaf, raw: string, where: string, problems: ConfigProblem[]): unknown {
  switch (leaf.kind) {
    case 'number': {
      const n = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(n)) {
        problems.push({ path: where, message: `expected a number, got ${JSON.stringify(raw)}` });
        return undefined;
      }
      return n;
    }
    case 'boolean':
      if (/^(true|1|yes|on)$/i.test(raw)) return true;
      if (/^(false|0|no|off)$/i.test(raw)) return false;
      problems.push({ path: where, message: `expected true or false, got ${JSON.stringify(raw)}` });
      return undefined;
    case 'string[]':
      return raw
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s.length > 0);
    default:
      return raw;
  }
}

function setPath(target: Record<string, any>, path: readonly string[], value: unknown): void {
  let cur = target;
  for (let i = 0; i < path.length - 1; i++) {
    const k = path[i]!;
    if (typeof cur[k] !== 'object' || cur[k] === null || Array.isArray(cur[k])) cur[k] = {};
    cur = cur[k];
  }
  cur[path[path.length - 1]!] = value;
}

function deepMerge(base: Record<string, any>, over: Record<string, any>): Record<string, any> {
  const out: Record<string, any> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (
      v &&
      typeof v === 'object' &&
      !Array.isArray(v) &&
      out[k] &&
      typeof out[k] === 'object' &&
      !Array.isArray(out[k])
    ) {
      out[k] = deepMerge(out[k], v);
    } else {
      out[k] = v;
    }
  }
  return out;
}

function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object') {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

const leafByDotted = new Map(configLeaves.map((l) => [l.path.join('.'), l]));
const leafByEnv = new Map(configLeaves.map((l) => [envNameOf(l.path), l]));

/** The top-level mapping of a YAML (or JSON) config file; problems are added when it has none. */
function readConfigFile(file: string, problems: ConfigProblem[]): Record<string, any> | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    problems.push({ path: `file ${file}`, message: `cannot read: ${(e as Error).message}` });
    return undefined;
  }
  try {
    const parsed = parseYaml(text) ?? {};
    if (typeof parsed === 'object' && !Array.isArray(parsed)) return parsed;
    problems.push({ path: `file ${file}`, message: 'expected a mapping at the top level' });
  } catch (e) {
    problems.push({ path: `file ${file}`, message: `not valid YAML: ${(e as Error).message}` });
  }
  return undefined;
}

/**
 * Where the Kafka brokers are set, if anywhere: a flag, `SLUICE_KAFKA_BROKERS`, `KAFKA_BROKERS`,
 * the config file or code. `sluice dev` starts a local broker only when they are set nowhere.
 */
export function brokersSource(opts: LoadConfigOptions = {}): string | undefined {
  const env = opts.env ?? process.env;
  if ((opts.flags ?? []).some(([path]) => path === 'kafka.brokers')) return 'flag --brokers';
  if (env.SLUICE_KAFKA_BROKERS) return 'env SLUICE_KAFKA_BROKERS';
  if (env.KAFKA_BROKERS) return 'env KAFKA_BROKERS';
  const file = opts.file ?? env.SLUICE_CONFIG;
  // An unreadable file is reported by loadConfig; here it just sets nothing.
  if (file && readConfigFile(file, [])?.kafka?.brokers !== undefined) return `file ${file}`;
  if (opts.overrides?.kafka?.brokers !== undefined) return 'code';
  return undefined;
}

/**
 * Loads the configuration: defaults < code overrides < file < `SLUICE_*` env < flags.
 * Validates once, lists every problem by path, and returns a frozen object.
 */
export function loadConfig(opts: LoadConfigOptions = {}): Readonly<SluiceConfig> {
  const env = opts.env ?? process.env;
  const problems: ConfigProblem[] = [];
  // Where each value came from (the last source that set it), named in the schema's problems.
  const sources = new Map<string, string>();
  const refused: string[] = [];
  let merged: Record<string, any> = (opts.overrides as Record<string, any>) ?? {};
  noteSources(merged, 'code', [], sources);

  const file = opts.file ?? env.SLUICE_CONFIG;
  if (file) {
    const parsed = readConfigFile(file, problems);
    if (parsed) {
      merged = deepMerge(merged, parsed);
      noteSources(parsed, `file ${file}`, [], sources);
    }
  }

  const fromEnv: Record<string, any> = {};
  if (env.KAFKA_BROKERS && !env.SLUICE_KAFKA_BROKERS) {
    const leaf = leafByDotted.get('kafka.brokers')!;
    setPath(fromEnv, leaf.path, coerce(leaf, env.KAFKA_BROKERS, 'env KAFKA_BROKERS', problems));
    sources.set('kafka.brokers', 'env KAFKA_BROKERS');
  }
  for (const [name, raw] of Object.entries(env)) {
    if (!name.startsWith('SLUICE_') || raw === undefined || RESERVED_ENV.has(name)) continue;
    const leaf = leafByEnv.get(name);
    if (!leaf) {
      problems.push({ path: `env ${name}`, message: `unknown setting${didYouMean(name, leafByEnv.keys())}` });
      continue;
    }
    const v = coerce(leaf, raw, `env ${name}`, problems);
    if (v === undefined) refused.push(leaf.path.join('.'));
    setPath(fromEnv, leaf.path, v);
    sources.set(leaf.path.join('.'), `env ${name}`);
  }
  merged = deepMerge(merged, fromEnv);

  const fromFlags: Record<string, any> = {};
  for (const [dotted, raw] of opts.flags ?? []) {
    const leaf = leafByDotted.get(dotted);
    if (!leaf) {
      problems.push({
        path: `flag --${dotted}`,
        message: `unknown setting${didYouMean(dotted, leafByDotted.keys())}`,
      });
      continue;
    }
    const v = coerce(leaf, raw, `flag --${dotted}`, problems);
    if (v === undefined) refused.push(dotted);
    setPath(fromFlags, leaf.path, v);
    sources.set(dotted, `flag --${dotted}`);
  }
  merged = deepMerge(merged, fromFlags);

  const result = configSchema.safeParse(merged);
  if (!result.success) {
    for (const issue of result.error.issues) {
      const parts = issue.path.map(String);
      const base = parts.join('.');
      if (issue.code === 'unrecognized_keys') {
        for (const k of issue.keys)
          problems.push({
            path: base ? `${base}.${k}` : k,
            message: `unknown key${didYouMean(k, keysUnder(parts))}`,
            ...sourceOf([...parts, k], sources),
          });
      } else if (issue.code !== 'custom') {
        problems.push({ path: base || '(root)', message: issue.message, ...sourceOf(parts, sources) });
      }
    }
    problems.push(...acrossFields(merged, result.error.issues, sources, refused));
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze(result.data!);
}

/** Records `label` as the source of every value under `o` (a setting's value, or a whole section). */
function noteSources(
  o: Record<string, any>,
  label: string,
  prefix: string[],
  into: Map<string, string>,
): void {
  for (const [k, v] of Object.entries(o)) {
    const path = [...prefix, k];
    if (v && typeof v === 'object' && !Array.isArray(v) && !leafByDotted.has(path.join('.')))
      noteSources(v, label, path, into);
    else into.set(path.join('.'), label);
  }
}

/**
 * `{ source }` of the value at `path` or of the nearest section above it that has one; else (a
 * section given whole, a value missing beside others) of the first value given under the nearest
 * section that has one.
 */
function sourceOf(path: readonly string[], sources: ReadonlyMap<string, string>): { source?: string } {
  for (let i = path.length; i > 0; i--) {
    const s = sources.get(path.slice(0, i).join('.'));
    if (s !== undefined) return { source: s };
  }
  for (let i = path.length; i > 0; i--) {
    const under = `${path.slice(0, i).join('.')}.`;
    for (const [p, s] of sources) if (p.startsWith(under)) return { source: s };
  }
  return {};
}

/**
 * The problems across settings (`kafka.ssl.cert` without `key`, `http.authMetrics` without a
 * token, …). zod skips an object's checks across its fields once one of them failed its own
 * check (a misspelt enum, a fractional number), and runs them on a value out of its bounds: they
 * are checked here on the configuration with every failed value taken out (its default in), so
 * that one run lists every problem. A problem that names a value taken out is left to that
 * value's own.
 */
function acrossFields(
  merged: Record<string, any>,
  issues: ReadonlyArray<{ code: string; path: readonly PropertyKey[]; keys?: string[] }>,
  sources: ReadonlyMap<string, string>,
  /** Settings whose env or flag string was refused (their default stands in). */
  refused: readonly string[],
): ConfigProblem[] {
  let repaired: Record<string, any>;
  try {
    repaired = structuredClone(merged);
  } catch {
    return []; // a value given in code that cannot be copied: its own problems are listed
  }
  const dropped: string[] = [...refused];
  for (const issue of issues) {
    if (issue.code === 'custom') continue;
    const parts = issue.path.map(String);
    const paths =
      issue.code === 'unrecognized_keys' ? (issue.keys ?? []).map((k) => [...parts, k]) : [leafOf(parts)];
    for (const p of paths) {
      if (p.length === 0) return []; // the whole configuration is not a mapping
      deletePath(repaired, p);
      dropped.push(p.join('.'));
    }
  }
  const again = configSchema.safeParse(repaired);
  if (again.success) return [];
  const out: ConfigProblem[] = [];
  // The settings a message names (`kafka.sasl.mechanism`), as whole dotted paths.
  const names = (m: string) => m.match(/[A-Za-z]\w*(?:\.[A-Za-z]\w*)+/g) ?? [];
  const about = (n: string) => dropped.some((d) => n === d || n.startsWith(`${d}.`));
  for (const issue of again.error.issues) {
    if (issue.code !== 'custom' || names(issue.message).some(about)) continue;
    const parts = issue.path.map(String);
    out.push({ path: parts.join('.'), message: issue.message, ...sourceOf(parts, sources) });
  }
  return out;
}

/** The setting a problem's path is in (`kafka.brokers.0` → `kafka.brokers`), or the path itself. */
function leafOf(parts: readonly string[]): string[] {
  for (let i = parts.length; i > 0; i--)
    if (leafByDotted.has(parts.slice(0, i).join('.'))) return parts.slice(0, i);
  return [...parts];
}

function deletePath(o: Record<string, any>, path: readonly string[]): void {
  let cur: any = o;
  for (let i = 0; i < path.length - 1; i++) {
    cur = cur?.[path[i]!];
    if (typeof cur !== 'object' || cur === null) return;
  }
  if (typeof cur === 'object' && cur !== null) delete cur[path[path.length - 1]!];
}

/** The keys the schema has right under `path` (`[]`: the top-level sections). */
function keysUnder(path: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const l of configLeaves) {
    if (l.path.length > path.length && path.every((p, i) => l.path[i] === p)) out.add(l.path[path.length]!);
  }
  return out;
}

/** The documented list of settings: path, env name (for docs and `sluice config`). */
export function describeSettings(): Array<{ path: string; env: string; kind: string }> {
  return configLeaves.map((l) => ({ path: l.path.join('.'), env: envNameOf(l.path), kind: l.kind }));
}
