import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../../src/config/load.js';
import { GROUP_INSTANCE_ID_PATTERN } from '../../../src/config/schema.js';
import { createLogger } from '../../../src/ops/logger.js';
import {
  claimGroupInstance,
  INSTANCE_ID_FILE,
  newInstanceId,
  readOrCreateInstanceId,
} from '../../../src/runtime/instance-id.js';

const logger = createLogger({ level: 'silent', format: 'json' });
const configWith = (dir: string, kafka: Record<string, string> = {}) =>
  loadConfig({
    env: {},
    flags: [
      ['state.dir', dir],
      ...Object.entries(kafka).map(([k, v]) => [`kafka.${k}`, v] as [string, string]),
    ],
  });

test('the instance id should be made once, kept in the folder and read back', () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'sluice-iid-')), 'app');
  const first = readOrCreateInstanceId(dir);
  assert.equal(first.created, true);
  assert.match(first.id, GROUP_INSTANCE_ID_PATTERN);
  assert.equal(readFileSync(join(dir, INSTANCE_ID_FILE), 'utf8').trim(), first.id);
  assert.deepEqual(readOrCreateInstanceId(dir), { id: first.id, created: false });
  // An unusable file (emptied, or edited to something Kafka refuses) is replaced.
  writeFileSync(join(dir, INSTANCE_ID_FILE), 'not a valid id!\n');
  const again = readOrCreateInstanceId(dir);
  assert.equal(again.created, true);
  assert.notEqual(again.id, first.id);
});

test('a new instance id should be the host name made legal plus 12 hex digits', () => {
  assert.match(newInstanceId('pod-0.sluice'), /^pod-0\.sluice-[0-9a-f]{12}$/);
  assert.match(newInstanceId('weird host/ü'), /^weird-host-[0-9a-f]{12}$/);
  assert.match(newInstanceId(''), /^sluice-[0-9a-f]{12}$/);
  assert.notEqual(newInstanceId('h'), newInstanceId('h'));
});

test('a worker should take its id from the config, else from its state folder, else none', async () => {
  const root = mkdtempSync(join(tmpdir(), 'sluice-iid-'));
  assert.equal(
    await claimGroupInstance(configWith(root, { staticMembership: 'false' }), 'app', logger),
    undefined,
  );
  const fromConfig = await claimGroupInstance(configWith(root, { groupInstanceId: 'pod-3' }), 'app', logger);
  assert.deepEqual(
    { ...fromConfig, release: undefined },
    {
      id: 'pod-3',
      source: 'config',
      ephemeral: false,
      release: undefined,
    },
  );

  const a = await claimGroupInstance(configWith(root), 'app', logger);
  assert.equal(a?.source, 'created');
  assert.equal(readFileSync(join(root, 'app', INSTANCE_ID_FILE), 'utf8').trim(), a?.id);
  // A second worker on the same folder while the first runs must not share its id.
  const b = await claimGroupInstance(configWith(root), 'app', logger);
  assert.equal(b?.source, 'ephemeral');
  assert.equal(b?.ephemeral, true);
  assert.notEqual(b?.id, a?.id);
  a?.release();
  // The first one restarted on its folder is the same member.
  const a2 = await claimGroupInstance(configWith(root), 'app', logger);
  assert.deepEqual([a2?.source, a2?.id], ['file', a?.id]);
  a2?.release();
});

test('kafka.groupInstanceId should be refused when Kafka would refuse it, or without static membership', () => {
  assert.throws(() => configWith('/tmp', { groupInstanceId: 'has space' }), /kafka\.groupInstanceId/);
  assert.throws(
    () => configWith('/tmp', { groupInstanceId: 'ok', staticMembership: 'false' }),
    /set, but kafka\.staticMembership is false/,
  );
});
