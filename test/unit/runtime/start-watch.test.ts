import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Logger } from '../../../src/ops/logger.js';
import { StartStepTimeoutError, StartWatch, within } from '../../../src/runtime/start-watch.js';

test('within should give the answer in time, and a StartStepTimeoutError naming the step after it', async () => {
  assert.equal(await within(Promise.resolve(3), 100, 'x'), 3);
  await assert.rejects(within(new Promise(() => undefined), 30, 'input offsets'), (e: unknown) => {
    assert.ok(e instanceof StartStepTimeoutError);
    assert.match((e as Error).message, /input offsets: no answer in 30 ms/);
    return true;
  });
  await assert.rejects(within(Promise.reject(new Error('refused')), 100, 'x'), /refused/);
});

test('a start watch should report the step it waits on until stopped: the restore as info, any other step as a warning', async () => {
  const lines: Array<{ level: string; at: any; msg: string }> = [];
  const logger = {
    info: (at: unknown, msg: string) => lines.push({ level: 'info', at, msg }),
    warn: (at: unknown, msg: string) => lines.push({ level: 'warn', at, msg }),
  } as unknown as Logger;
  const watch = new StartWatch(logger, () => ({ remaining: 5 }), 20);
  watch.step = 'restore';
  await new Promise((r) => setTimeout(r, 50));
  watch.step = 'input offsets';
  await new Promise((r) => setTimeout(r, 50));
  watch.stop();
  const n = lines.length;
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(lines.length, n, 'nothing after stop');
  const restore = lines.filter((l) => l.at.step === 'restore');
  const offsets = lines.filter((l) => l.at.step === 'input offsets');
  assert.ok(
    restore.length > 0 && restore.every((l) => l.level === 'info' && l.msg === 'task still starting'),
  );
  assert.deepEqual(restore[0]!.at.progress, { remaining: 5 });
  assert.ok(offsets.length > 0 && offsets.every((l) => l.level === 'warn' && l.msg === 'task start is slow'));
  assert.ok(offsets.at(-1)!.at.ms >= 50);
});
