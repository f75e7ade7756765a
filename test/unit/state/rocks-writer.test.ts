import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { RocksStore } from '../../../src/state/rocks-store.js';
import { useWriterScript, writerUsable } from '../../../src/state/rocks-writer.js';

// Its own file: a thread that cannot start makes the process write on its own thread for good.
test('rocks store should write on its own thread when the writer thread cannot start, and lose no batch', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'sluice-writer-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const bad = join(root, 'thread.mjs');
  writeFileSync(bad, "throw new Error('cannot load the binding');\n");
  useWriterScript(pathToFileURL(bad));
  const db = await RocksStore.open({ dir: join(root, 'task'), stores: ['s'] });
  try {
    const sent = db.writeOffThread({ stores: ['s'], keys: ['a'], values: ['1'] });
    await assert.rejects(sent, /writer thread exited/, 'the batch sent to it fails, at its exit');
    assert.equal(writerUsable(), false);
    assert.equal(db.getSync('s', Buffer.from('a')), undefined);
    await db.writeOffThread({ stores: ['s', 's'], keys: ['a', 'b'], values: ['1', '2'] });
    assert.equal(db.getSync('s', Buffer.from('a'))?.toString(), '1', 'then written on this thread');
    assert.equal(db.getSync('s', Buffer.from('b'))?.toString(), '2');
  } finally {
    await db.close();
  }
});
