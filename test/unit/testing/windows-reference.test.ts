import { test } from 'node:test';
import { string } from '../../../src/index.js';
import { TestDriver } from '../../../src/testing/index.js';
import {
  checkLateAndRetention,
  checkWindowOutputs,
  GRACE,
  OOO,
  reference,
  WINDOW_OUTPUTS,
  type WindowOutput,
  windowInput,
} from '../../helpers/window-reference.js';

/**
 * The window reference test of test/integration/windows.test.ts (the fixture job, every window
 * type, out-of-order and late records, grace to the millisecond, closed windows deleted) with the
 * test driver instead of a broker and a worker process: the same job, input, reference and checks.
 * Once as one batch per partition, once record by record with a checkpoint after each: the
 * results depend only on the order within each partition, not on batching.
 */
process.env.TEST_APP_ID = 'unit-windows';
process.env.TEST_INPUT = 'in';
process.env.TEST_GRACE = String(GRACE);
const { default: app } = await import('../../fixtures/jobs/windows.js');

for (const batching of ['one batch', 'record by record'] as const) {
  test(`windows should equal the reference with the test driver (${batching})`, async () => {
    const { records, flushKeys } = windowInput();
    const ref = reference(records);
    const driver = new TestDriver(app, {
      partitions: 3,
      config: { processing: { maxOutOfOrdernessMs: OOO } },
    });
    try {
      const input = driver.input('in', { key: string(), value: string() });
      const rows = records.map((r) => ({
        key: r.k,
        value: JSON.stringify({ k: r.k, v: r.v, t: r.t }),
        partition: r.p,
      }));
      if (batching === 'one batch') await input.pipeAll(rows);
      else for (const r of rows) await input.pipe(r.key, r.value, r);
      const outs = {} as Record<WindowOutput, Array<{ key: string | null; value: string | null }>>;
      for (const o of WINDOW_OUTPUTS)
        outs[o] = driver
          .output(`unit-windows-${o}`, { key: string(), value: string() })
          .readAll()
          .map(({ key, value }) => ({ key, value }));
      checkWindowOutputs(ref, flushKeys, outs);
      const changelog = driver.kafka.readAll('unit-windows-tumbling-w-changelog').map((r) => ({
        key: r.key?.toString() ?? null,
        value: r.value?.toString() ?? null,
      }));
      checkLateAndRetention(ref, flushKeys, await driver.registry.metrics(), changelog);
    } finally {
      await driver.close();
    }
  });
}
