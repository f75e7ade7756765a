import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';

/** Debian's chromium (`apt-get install chromium`); tests skip when it is missing (fail in CI: `prereq.ts`). */
export const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

export interface Page {
  navigate(url: string): Promise<void>;
  /** Evaluates an expression in the page and returns its JSON value. */
  evaluate<T>(expression: string): Promise<T>;
  screenshot(): Promise<Buffer>;
  close(): Promise<void>;
}

/**
 * Starts headless Chromium with a fresh profile and drives one page over the DevTools protocol.
 */
export async function openChromium(opts: { width?: number; height?: number } = {}): Promise<Page> {
  if (!CHROMIUM) throw new Error('chromium is not installed (apt-get install -y chromium)');
  const profile = mkdtempSync(join(tmpdir(), 'sluice-chromium-'));
  const child: ChildProcess = spawn(
    CHROMIUM,
    [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--no-first-run',
      `--user-data-dir=${profile}`,
      '--remote-debugging-port=0',
      `--window-size=${opts.width ?? 1400},${opts.height ?? 900}`,
      'about:blank',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const browserWs = await new Promise<string>((resolve, reject) => {
    let err = '';
    const timer = setTimeout(() => reject(new Error(`chromium did not start:\n${err}`)), 30_000);
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /DevTools listening on (ws:\/\/\S+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once('exit', (c) => reject(new Error(`chromium exited (${c}):\n${err}`)));
  });
  const http = browserWs.replace(/^ws:/, 'http:').replace(/\/devtools\/.*$/, '');
  const targets = (await (await fetch(`${http}/json/list`)).json()) as Array<{
    type: string;
    webSocketDebuggerUrl: string;
  }>;
  const page = targets.find((t) => t.type === 'page');
  if (!page) throw new Error('chromium has no page target');
  const ws = new WebSocket(page.webSocketDebuggerUrl, { perMessageDeflate: false });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  const waiters: Array<{ method: string; resolve: () => void }> = [];
  ws.on('message', (data) => {
    const msg = JSON.parse(data.toString());
    if (msg.id !== undefined) {
      const p = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) p?.reject(new Error(`${msg.error.message}`));
      else p?.resolve(msg.result);
    } else if (msg.method) {
      for (let i = waiters.length - 1; i >= 0; i--)
        if (waiters[i]!.method === msg.method) waiters.splice(i, 1)[0]!.resolve();
    }
  });
  const send = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<any>((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve, reject });
      ws.send(JSON.stringify({ id, method, params }));
    });
  await send('Page.enable');
  await send('Runtime.enable');
  return {
    async navigate(url) {
      const loaded = new Promise<void>((resolve) => waiters.push({ method: 'Page.loadEventFired', resolve }));
      await send('Page.navigate', { url });
      await loaded;
    },
    async evaluate(expression) {
      const r = await send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true });
      if (r.exceptionDetails) throw new Error(`page threw: ${JSON.stringify(r.exceptionDetails)}`);
      return r.result.value;
    },
    async screenshot() {
      const r = await send('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true });
      return Buffer.from(r.data, 'base64');
    },
    async close() {
      ws.close();
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once('exit', r)));
      // Its helper processes can still be writing to the profile when the browser has exited
      // (seen in CI: ENOTEMPTY, twice, once after a second of retries). A temporary profile that
      // cannot be removed yet is not the test's failure: it is retried once more a little later,
      // then left in the temporary folder.
      const remove = () => rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      try {
        remove();
      } catch {
        await new Promise((r) => setTimeout(r, 2000));
        try {
          remove();
        } catch (e) {
          process.stderr.write(`chromium profile ${profile} left behind: ${(e as Error).message}\n`);
        }
      }
    },
  };
}
