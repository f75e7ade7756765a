import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { StateIoError, StateLockedError } from '../../../src/state/errors.js';
import { RocksStore } from '../../../src/state/rocks-store.js';
import { skipUnlessPresent } from '../../helpers/prereq.js';

const STORE_MODULE = fileURLToPath(new URL('../../../src/state/rocks-store.js', import.meta.url));
const k = (s: string) => Buffer.from(s);

/** A temp folder, and stores closed before it is removed. */
function scope(t: TestContext) {
  const root = mkdtempSync(join(tmpdir(), 'sluice-rocks-'));
  const open: RocksStore[] = [];
  t.after(async () => {
    for (const s of open) await s.close().catch(() => {});
    rmSync(root, { recursive: true, force: true });
  });
  return {
    dir: (name = 'task') => join(root, name),
    async open(dir: string, stores: string[]) {
      const s = await RocksStore.open({ dir, stores });
      open.push(s);
      return s;
    },
  };
}

async function collect(it: AsyncIterable<[Buffer, Buffer]>): Promise<string[]> {
  const out: string[] = [];
  for await (const [key, value] of it) out.push(`${key}=${value}`);
  return out;
}

test('rocks store should write a batch and its meta entry atomically', async (t) => {
  const s = scope(t);
  const db = await s.open(s.dir(), ['a', 'b']);
  assert.equal(db.readMeta(), undefined);
  await db.write(
    [
      { store: 'a', key: k('k1'), value: k('v1') },
      { store: 'b', key: k('k1'), value: k('other') },
    ],
    k('meta-1'),
  );
  assert.equal(db.getSync('a', k('k1'))?.toString(), 'v1');
  assert.equal(db.getSync('b', k('k1'))?.toString(), 'other');
  assert.equal(db.readMeta()?.toString(), 'meta-1');

  // A batch naming an unknown store fails whole: neither its puts nor its meta land.
  await assert.rejects(
    db.write(
      [
        { store: 'a', key: k('k2'), value: k('v2') },
        { store: 'nope', key: k('k2'), value: k('v2') },
      ],
      k('meta-2'),
    ),
    /unknown state store "nope"/,
  );
  assert.equal(db.getSync('a', k('k2')), undefined);
  assert.equal(db.readMeta()?.toString(), 'meta-1');

  await db.write([{ store: 'a', key: k('k1'), value: null }], k('meta-3'));
  assert.deepEqual(db.getManySync('a', [k('k1'), k('k2')]), [undefined, undefined]);
  assert.equal(db.readMeta()?.toString(), 'meta-3');
});

test('rocks store should keep data and meta across a reopen', async (t) => {
  const s = scope(t);
  const dir = s.dir();
  const first = await RocksStore.open({ dir, stores: ['counts'] });
  const ops = Array.from({ length: 1000 }, (_, i) => ({
    store: 'counts',
    key: k(`key-${i}`),
    value: k(`${i}`),
  }));
  await first.write(ops, k('{"v":1}'));
  await first.close();
  await first.close(); // idempotent
  assert.ok(!existsSync(join(dir, '.lock')), 'close releases the lock');

  const again = await s.open(dir, ['counts']);
  assert.equal(again.readMeta()?.toString(), '{"v":1}');
  const values = again.getManySync('counts', [k('key-0'), k('key-999'), k('key-1000')]);
  assert.deepEqual(
    values.map((v) => v?.toString()),
    ['0', '999', undefined],
  );
  assert.ok(again.approximateSize() > 0);
});

test('rocks store should write batches on the writer thread, in order, every byte value kept', async (t) => {
  const s = scope(t);
  const db = await s.open(s.dir(), ['a', 'b']);
  // Keys and values as latin1 strings, one char per byte: all 256 byte values go through.
  const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  const latin = bytes.toString('latin1');
  await db.writeOffThread({
    stores: ['a', 'a', 'b'],
    keys: [latin, 'gone', 'x'],
    values: ['v1', 'old', latin],
  });
  const before = db.writes;
  // Sent without waiting: the thread writes them in order, the later one wins.
  const first = db.writeOffThread({ stores: ['a', 'a'], keys: ['gone', 'x'], values: [null, 'first'] });
  const second = db.writeOffThread({ stores: ['a'], keys: ['x'], values: ['second'] });
  assert.ok(db.writes > before, 'a read overlapping the writes can tell');
  await Promise.all([first, second]);
  assert.equal(db.getSync('a', bytes)?.toString(), 'v1');
  assert.deepEqual(db.getSync('b', k('x')), bytes);
  assert.equal(db.getSync('a', k('gone')), undefined, 'a null value deletes');
  assert.equal(db.getSync('a', k('x'))?.toString(), 'second');
  assert.throws(
    () => db.writeOffThread({ stores: ['a', 'nope'], keys: ['1', '2'], values: ['1', '2'] }),
    /unknown state store "nope"/,
    'an unknown store throws before anything is sent',
  );
  assert.equal(db.getSync('a', k('1')), undefined);
});

test('rocks store should close only after the batches on the writer thread are written', async (t) => {
  const s = scope(t);
  const dir = s.dir();
  const db = await RocksStore.open({ dir, stores: ['counts'] });
  const n = 20_000;
  const sent: Array<Promise<void>> = [];
  for (let b = 0; b < 10; b++) {
    const keys = Array.from({ length: n / 10 }, (_, i) => `key-${b * (n / 10) + i}`);
    sent.push(db.writeOffThread({ stores: keys.map(() => 'counts'), keys, values: keys }));
  }
  await db.close(); // not waiting for `sent` first
  await Promise.all(sent);
  assert.throws(() => db.writeOffThread({ stores: ['counts'], keys: ['k'], values: ['v'] }), StateIoError);
  const again = await s.open(dir, ['counts']);
  const values = again.getManySync('counts', [k('key-0'), k(`key-${n - 1}`)]);
  assert.deepEqual(
    values.map((v) => v?.toString()),
    ['key-0', `key-${n - 1}`],
  );
});

test('rocks store should refuse a second open in this process', async (t) => {
  const s = scope(t);
  const dir = s.dir();
  await s.open(dir, ['a']);
  await assert.rejects(RocksStore.open({ dir, stores: ['a'] }), (err: unknown) => {
    assert.ok(err instanceof StateLockedError);
    assert.equal(err.code, 'SLUICE_STATE_LOCKED');
    assert.equal(err.ownerPid, process.pid);
    assert.equal(err.retriable, true);
    assert.match(err.message, new RegExp(`pid ${process.pid}`));
    return true;
  });
});

/** Starts a process that opens the store and holds it; resolves once it is open. */
async function holder(t: TestContext, dir: string): Promise<ChildProcess> {
  const script = `
    import { RocksStore } from ${JSON.stringify(STORE_MODULE)};
    const db = await RocksStore.open({ dir: ${JSON.stringify(dir)}, stores: ['a'] });
    await db.write([{ store: 'a', key: Buffer.from('from-child'), value: Buffer.from('yes') }], Buffer.from('m'));
    process.stdout.write('open\\n');
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.after(() => child.kill('SIGKILL'));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => d.toString().includes('open') && resolve());
    child.on('exit', (code) => reject(new Error(`holder exited with ${code}`)));
  });
  return child;
}

test('rocks store should name the pid of another process holding the folder, then take over once it died', async (t) => {
  const s = scope(t);
  const dir = s.dir();
  const child = await holder(t, dir);
  await assert.rejects(RocksStore.open({ dir, stores: ['a'] }), (err: unknown) => {
    assert.ok(err instanceof StateLockedError);
    assert.equal(err.ownerPid, child.pid);
    assert.match(err.message, new RegExp(`process ${child.pid} on ${hostname()}`));
    assert.match(err.message, new RegExp(dir.replaceAll(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    return true;
  });

  // RocksDB's own LOCK is the safety net when our lock file misleads (here: it names another host).
  writeFileSync(
    join(dir, '.lock'),
    JSON.stringify({ pid: 1, hostname: 'elsewhere', since: 'x', token: 'y' }),
  );
  await assert.rejects(RocksStore.open({ dir, stores: ['a'] }), (err: unknown) => {
    assert.ok(err instanceof StateLockedError);
    assert.match(err.message, /RocksDB's LOCK is held by another process/);
    return true;
  });

  // A crash (no close): the lock file stays behind, naming a dead pid.
  writeFileSync(
    join(dir, '.lock'),
    JSON.stringify({ pid: child.pid, hostname: hostname(), since: 'x', token: 'z' }),
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
  assert.equal(JSON.parse(readFileSync(join(dir, '.lock'), 'utf8')).pid, child.pid);
  const db = await s.open(dir, ['a']);
  assert.equal(db.getSync('a', k('from-child'))?.toString(), 'yes');
  assert.equal(JSON.parse(readFileSync(join(dir, '.lock'), 'utf8')).pid, process.pid);
});

test('rocks store should take over stale lock files', async (t) => {
  const s = scope(t);
  const deadPid = spawnSync(process.execPath, ['-e', '']).pid;
  const stale = [
    { pid: deadPid, hostname: hostname(), since: 'then', token: 'x' }, // owner gone
    { pid: process.pid, hostname: hostname(), since: 'then', token: 'x' }, // our pid, from a previous life
    // pid reused (detected through /proc on Linux only)
    ...(existsSync('/proc/self/stat')
      ? [{ pid: process.ppid, hostname: hostname(), procStart: '1', since: 'then', token: 'x' }]
      : []),
    { pid: 1, hostname: 'a-recreated-container', since: 'then', token: 'x' }, // another host
    'garbage',
  ];
  for (const [i, content] of stale.entries()) {
    const dir = s.dir(`stale-${i}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, '.lock'), typeof content === 'string' ? content : JSON.stringify(content));
    const db = await s.open(dir, ['a']);
    assert.equal(JSON.parse(readFileSync(join(dir, '.lock'), 'utf8')).pid, process.pid, `case ${i}`);
    await db.close();
  }
  // A live owner on this host (our parent) is respected.
  const dir = s.dir('live');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, '.lock'),
    JSON.stringify({ pid: process.ppid, hostname: hostname(), since: 'x', token: 'y' }),
  );
  await assert.rejects(RocksStore.open({ dir, stores: ['a'] }), StateLockedError);
});

test('rocks store should open with stores added or removed since the folder was created', async (t) => {
  const s = scope(t);
  const dir = s.dir();
  const first = await RocksStore.open({ dir, stores: ['a', 'old'] });
  await first.write([
    { store: 'a', key: k('x'), value: k('1') },
    { store: 'old', key: k('x'), value: k('2') },
  ]);
  await first.close();

  const second = await RocksStore.open({ dir, stores: ['a', 'added'] });
  assert.deepEqual(second.orphanStores, ['old']);
  assert.equal(second.getSync('a', k('x'))?.toString(), '1');
  assert.equal(second.getSync('added', k('x')), undefined);
  await second.write([{ store: 'added', key: k('y'), value: k('3') }], k('m'));
  assert.throws(() => second.getSync('old', k('x')), /unknown state store "old"/);
  await second.close();

  const third = await s.open(dir, ['a', 'added', 'old']);
  assert.deepEqual(third.orphanStores, []);
  assert.equal(third.getSync('added', k('y'))?.toString(), '3');
  assert.equal(third.getSync('old', k('x'))?.toString(), '2');
});

test('rocks store should reject invalid store names', async (t) => {
  const s = scope(t);
  for (const bad of ['default', '__meta', 'has space', '', 'a/b']) {
    await assert.rejects(RocksStore.open({ dir: s.dir(), stores: [bad] }), /invalid state store name/);
  }
  await assert.rejects(RocksStore.open({ dir: s.dir(), stores: ['a', 'a'] }), /listed twice/);
});

test('rocks store should iterate in byte order within a range', async (t) => {
  const s = scope(t);
  const db = await s.open(s.dir(), ['a', 'b']);
  const keys = ['b', 'a', 'c', 'ab', 'ba', '\u00ff', 'a\u0000'];
  await db.write(keys.map((key) => ({ store: 'a', key: k(key), value: k(key.toUpperCase()) })));
  await db.write([{ store: 'b', key: k('zzz'), value: k('other store') }]);
  const sorted = keys.map(k).sort(Buffer.compare);
  const all = await collect(db.iterate('a'));
  assert.deepEqual(
    all,
    sorted.map((key) => `${key}=${key.toString().toUpperCase()}`),
  );
  assert.deepEqual(await collect(db.iterate('a', { gte: k('ab'), lt: k('c') })), ['ab=AB', 'b=B', 'ba=BA']);
  assert.deepEqual(await collect(db.iterate('a', { gte: k('b'), reverse: true, limit: 2 })), [
    `${k('\u00ff')}=${k('\u00ff'.toUpperCase())}`,
    'c=C',
  ]);
  assert.deepEqual(await collect(db.iterate('b')), ['zzz=other store']);
  assert.deepEqual(
    db.scanSync('a', { gte: k('a'), lt: k('b') }).map(([key, v]) => `${key}=${v}`),
    ['a=A', 'a\u0000=A\u0000', 'ab=AB'],
  );

  // Enough rows to need several batches; breaking out closes the iterator.
  const many = Array.from({ length: 2500 }, (_, i) => ({
    store: 'b',
    key: k(`n${String(i).padStart(5, '0')}`),
    value: k(''),
  }));
  await db.write(many);
  let n = 0;
  let last = '';
  for await (const [key] of db.iterate('b', { lt: k('o') })) {
    assert.ok(key.toString() > last);
    last = key.toString();
    n++;
  }
  assert.equal(n, 2500);
  for await (const _ of db.iterate('b')) break;
});

test('rocks store should end a scan with an error when closed during it', async (t) => {
  const s = scope(t);
  const db = await s.open(s.dir(), ['a']);
  await db.write(Array.from({ length: 3000 }, (_, i) => ({ store: 'a', key: k(`k${i}`), value: k('v') })));
  const it = db.iterate('a')[Symbol.asyncIterator]();
  await it.next();
  await db.close();
  let err: unknown;
  try {
    for (;;) if ((await it.next()).done) break;
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof StateIoError, `got ${err}`);
});

test('rocks store should refuse reads and writes after close instead of crashing', async (t) => {
  const s = scope(t);
  const db = await RocksStore.open({ dir: s.dir(), stores: ['a'] });
  await db.close();
  assert.equal(db.isOpen, false);
  assert.throws(
    () => db.getSync('a', k('x')),
    (e: unknown) => e instanceof StateIoError && /is closed/.test(e.message),
  );
  assert.throws(() => db.getManySync('a', [k('x')]), StateIoError);
  assert.throws(() => db.readMeta(), StateIoError);
  assert.throws(() => db.scanSync('a'), StateIoError);
  await assert.rejects(db.write([{ store: 'a', key: k('x'), value: k('y') }]), StateIoError);
});

test('rocks store should clear one store and wipe everything', async (t) => {
  const s = scope(t);
  const dir = s.dir();
  const db = await s.open(dir, ['a', 'b']);
  await db.write(
    [
      { store: 'a', key: k('x'), value: k('1') },
      { store: 'b', key: k('x'), value: k('2') },
    ],
    k('meta'),
  );
  await db.clear('a');
  assert.equal(db.getSync('a', k('x')), undefined);
  assert.equal(db.getSync('b', k('x'))?.toString(), '2');

  await db.wipeAll();
  assert.equal(db.getSync('b', k('x')), undefined);
  assert.equal(db.readMeta(), undefined);
  assert.ok(existsSync(join(dir, '.lock')), 'still locked');
  await db.write([{ store: 'a', key: k('y'), value: k('after') }]);
  assert.equal(db.getSync('a', k('y'))?.toString(), 'after');
});

test('rocks store should destroy a folder only when nobody holds it', async (t) => {
  const s = scope(t);
  const dir = s.dir();
  const db = await RocksStore.open({ dir, stores: ['a'] });
  await assert.rejects(RocksStore.destroy(dir), StateLockedError);
  await db.close();
  await RocksStore.destroy(dir);
  assert.ok(!existsSync(dir));
  const fresh = await s.open(dir, ['a']);
  assert.equal(fresh.readMeta(), undefined);
});

test('rocks store should report a full disk naming the folder', async (t) => {
  // A 1 MiB tmpfs in a private mount namespace; needs unshare(1) and user namespaces.
  const s = scope(t);
  const mount = s.dir('tiny');
  mkdirSync(mount, { recursive: true });
  const dir = join(mount, 'task');
  const script = `
    import { RocksStore } from ${JSON.stringify(STORE_MODULE)};
    import { randomBytes } from 'node:crypto';
    process.stdout.write('started\\n');
    const db = await RocksStore.open({ dir: ${JSON.stringify(dir)}, stores: ['a'] });
    let err;
    for (let i = 0; i < 1000 && !err; i++) {
      const ops = Array.from({ length: 100 }, () => ({ store: 'a', key: randomBytes(16), value: randomBytes(1000) }));
      try { await db.write(ops); } catch (e) { err = e; }
    }
    await db.close().catch(() => {});
    process.stdout.write(JSON.stringify({ name: err?.name, code: err?.code, diskFull: err?.diskFull, message: err?.message }) + '\\n');
  `;
  const shell = `mount -t tmpfs -o size=1m tmpfs "$0" && exec "$1" --input-type=module -e "$2"`;
  const res = spawnSync('unshare', ['-rm', 'sh', '-c', shell, mount, process.execPath, script], {
    encoding: 'utf8',
  });
  if (res.error !== undefined || !res.stdout?.includes('started')) {
    // Skipped without unshare and user namespaces, except in CI, where it fails.
    skipUnlessPresent(t, `cannot mount a private tmpfs here (${res.error?.message ?? res.stderr?.trim()})`);
    return;
  }
  const out = JSON.parse(res.stdout.trim().split('\n').at(-1)!);
  assert.equal(out.name, 'StateIoError');
  assert.equal(out.code, 'SLUICE_STATE_IO');
  assert.equal(out.diskFull, true);
  assert.match(out.message, /disk full/);
  assert.ok(out.message.includes(dir), out.message);
});
