import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

type Method = (this: any, ...args: any[]) => unknown;
const WRAPPED = Symbol('sluice wrapped');

/**
 * Replaces `method` on the prototype of the kafkajs class that the module at `path` exports, if
 * that module is where kafkajs 2.2.4 has it and the prototype has the method and every one in
 * `needs` (what the replacement calls); says whether it did. A kafkajs that moved or renamed
 * them is left as it is, and the caller's flag says so (kafkajs-preload.ts reports the flags).
 * `replacement` is either the new method or, as `{ wrap }`, a function that makes it from the
 * original; a method already wrapped is not wrapped twice.
 */
export function replaceMethod(
  path: string,
  method: string,
  replacement: ((...args: never[]) => unknown) | { wrap: (original: Method) => Method },
  needs: readonly string[] = [],
): boolean {
  try {
    const proto = (require(path) as { prototype?: Record<string, unknown> }).prototype;
    if (proto === undefined || ![method, ...needs].every((m) => typeof proto[m] === 'function')) return false;
    if (typeof replacement === 'function') {
      proto[method] = replacement;
      return true;
    }
    const original = proto[method] as Method & { [WRAPPED]?: true };
    if (original[WRAPPED] === true) return true;
    proto[method] = Object.assign(replacement.wrap(original), { [WRAPPED]: true as const });
    return true;
  } catch {
    return false;
  }
}
