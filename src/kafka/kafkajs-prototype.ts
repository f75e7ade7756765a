import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/**
 * Replaces `method` on the prototype of the kafkajs class that the module at `path` exports, if
 * that module is where kafkajs 2.2.4 has it and the prototype has the method and every one in
 * `needs` (what the replacement calls); says whether it did. A kafkajs that moved or renamed
 * them is left as it is, and the caller's flag says so (kafkajs-preload.ts reports the flags).
 */
export function replaceMethod(
  path: string,
  method: string,
  replacement: (...args: never[]) => unknown,
  needs: readonly string[] = [],
): boolean {
  try {
    const proto = (require(path) as { prototype?: Record<string, unknown> }).prototype;
    if (proto === undefined || ![method, ...needs].every((m) => typeof proto[m] === 'function')) return false;
    proto[method] = replacement;
    return true;
  } catch {
    return false;
  }
}
