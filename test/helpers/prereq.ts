import type { TestContext } from 'node:test';

/** True in CI: `CI` is set to anything but an empty string, `false` or `0` (CI services set `CI=true`). */
export function inCI(env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env.CI;
  return v !== undefined && v !== '' && v !== 'false' && v !== '0';
}

/**
 * For a test whose prerequisite (a browser, a private tmpfs) may be missing on a developer's
 * machine: `missing` says what is missing (undefined: nothing). Outside CI the test is skipped;
 * in CI it fails, because the README counts the test as proof and a skip would pass silently.
 * Returns true when the test was skipped (the caller returns).
 */
export function skipUnlessPresent(
  t: Pick<TestContext, 'skip'>,
  missing: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): boolean {
  if (missing === undefined) return false;
  if (inCI(env))
    throw new Error(
      `prerequisite missing in CI (CI=${env.CI}): ${missing}; this test must run there, not skip`,
    );
  t.skip(missing);
  return true;
}
