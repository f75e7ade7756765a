import assert from 'node:assert/strict';
import { test } from 'node:test';
import { App, json, string, tumbling } from '../../../src/index.js';
import { taskHarness } from '../../helpers/task-harness.js';

/**
 * What a task does when user code fails: the outputs the failing record or timer emitted are
 * taken back, and nothing else (issue 13, items 1 and 3).
 */

test("a record whose operator throws should keep the window results its watermark advance fired (issue 13.1)", async () => {
  const app = new App({ id: 'unit-win-throw' });
  app
    .stream('in', { key: string(), value: json<{ boom?: boolean }>() })
    .peek((v) => {
      if (v.boom) throw new Error('boom');
    })
    .byKey()
    .window(tumbling(10), { grace: 0 })
    .count()
    .to('out');
  const h = await taskHarness(app);
  // Two records in [0, 10); the third, at 25, closes that window and then fails in peek.
  h.task.process('in', [h.rec('a', {}, 1), h.rec('a', {}, 2), h.rec('a', { boom: true }, 25)], () => undefined);
  const out = await h.checkpoint();
  assert.deepEqual(h.values(out, 'out'), [{ start: 0, end: 10, value: 2 }], 'the closed window is emitted');
  assert.equal(out.get('unit-win-throw-dlq')?.length, 1, 'the failing record is dead-lettered');
  await h.task.close({ checkpoint: false });
});
