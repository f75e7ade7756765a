/**
 * Module hooks for loading a job (registered by load-job.ts after tsx's): a `.ts`/`.tsx` file of
 * the project is always an ES module, whatever the nearest package.json's `type` says. In a
 * CommonJS project (`npm init -y`) tsx would otherwise load `job.ts` as CommonJS, whose
 * `import … from 'sluice'` (an ES-only package) then fails with "Cannot require() ES Module … in
 * a cycle". Files under node_modules, `.mts` and `.cts` keep Node's own rules.
 */
interface Resolved {
  url: string;
  format?: string | null;
}
type NextResolve = (specifier: string, context: unknown) => Promise<Resolved>;

export function isProjectTypeScript(url: string): boolean {
  if (!url.startsWith('file:')) return false;
  const path = new URL(url).pathname;
  return /\.tsx?$/.test(path) && !path.endsWith('.d.ts') && !path.includes('/node_modules/');
}

export async function resolve(specifier: string, context: unknown, next: NextResolve): Promise<Resolved> {
  const r = await next(specifier, context);
  return isProjectTypeScript(r.url) ? { ...r, format: 'module' } : r;
}
