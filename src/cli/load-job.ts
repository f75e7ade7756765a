import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type App, isApp } from '../api/app.js';
import { SluiceError } from '../errors.js';

/**
 * Loads a job file: a module whose default export (or export named `app`) is an App.
 * TypeScript job files are loaded through tsx, so `sluice run job.ts` works without a build.
 */
export async function loadJob(file: string): Promise<App> {
  const path = resolve(file);
  if (!existsSync(path)) throw new SluiceError('SLUICE_JOB_INVALID', `job file not found: ${path}`);
  if (/\.(c|m)?tsx?$/.test(path)) {
    const { register } = await import('tsx/esm/api');
    register();
  }
  let mod: Record<string, unknown>;
  try {
    mod = await import(pathToFileURL(path).href);
  } catch (e) {
    throw new SluiceError('SLUICE_JOB_INVALID', `cannot load job ${path}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  const app = mod.default ?? mod.app;
  if (!isApp(app)) {
    throw new SluiceError(
      'SLUICE_JOB_INVALID',
      `job ${path} must export an App as its default export (export default app)`,
    );
  }
  return app;
}
