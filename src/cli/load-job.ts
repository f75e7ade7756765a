import { existsSync } from 'node:fs';
import { register } from 'node:module';
import { extname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type App, isApp } from '../api/app.js';
import { SluiceError } from '../errors.js';

let hooked = false;

/**
 * Loads a job file: a module whose default export (or export named `app`) is an App.
 * TypeScript job files are loaded through tsx, so `sluice run job.ts` works without a build, and
 * always as ES modules (job-hooks.ts), also in a CommonJS project. A `.js` job follows Node's
 * rules: ESM with `import` where package.json says `"type": "module"` (or as `.mjs`), CommonJS
 * with `require('sluice')` and `module.exports = app` otherwise (or as `.cjs`).
 */
export async function loadJob(file: string): Promise<App> {
  const path = resolve(file);
  if (!existsSync(path)) throw new SluiceError('SLUICE_JOB_INVALID', `job file not found: ${path}`);
  const ext = extname(path);
  if (ext === '.cts') {
    throw new SluiceError(
      'SLUICE_JOB_INVALID',
      `cannot load job ${path}: CommonJS TypeScript (.cts) job files are not supported; name it ` +
        `${path.slice(0, -4)}.ts or .mts (TypeScript jobs load as ES modules, in CommonJS projects too)`,
    );
  }
  if (/^\.m?tsx?$/.test(ext) && !hooked) {
    const { register: registerTsx } = await import('tsx/esm/api');
    registerTsx();
    // Registered after tsx's, so it runs first and decides the format tsx then compiles to.
    register('./job-hooks.js', import.meta.url);
    hooked = true;
  }
  let mod: Record<string, unknown>;
  try {
    mod = await import(pathToFileURL(path).href);
  } catch (e) {
    throw new SluiceError(
      'SLUICE_JOB_INVALID',
      `cannot load job ${path}: ${(e as Error).message}${hint(e)}`,
      {
        cause: e,
      },
    );
  }
  const app = mod.default ?? mod.app;
  if (!isApp(app)) {
    throw new SluiceError(
      'SLUICE_JOB_INVALID',
      `job ${path} must export an App as its default export (export default app, or module.exports = app)`,
    );
  }
  return app;
}

/** What to change for the load errors a project's module type causes. */
function hint(e: unknown): string {
  const msg = String((e as Error)?.message ?? e);
  const code = (e as { code?: string })?.code;
  if (/Cannot use import statement outside a module|Unexpected token 'export'/.test(msg)) {
    return (
      '\nThis .js job uses import/export but its package.json has no "type": "module": add it, or ' +
      "name the file .mjs (or write it as CommonJS: require('sluice') and module.exports = app)."
    );
  }
  if (['ERR_REQUIRE_ESM', 'ERR_REQUIRE_CYCLE_MODULE', 'ERR_REQUIRE_ASYNC_MODULE'].includes(code ?? '')) {
    return (
      '\nA CommonJS job require()s an ES module: sluice is one, which needs Node.js ≥ 20.19 (22.12 on 22); ' +
      'modules with top-level await cannot be required. Or make the job an ES module (.mjs, .ts, or ' +
      '"type": "module" in package.json).'
    );
  }
  return '';
}
