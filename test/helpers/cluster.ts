import { readFileSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { portInUse, signalGroup, waitForExit } from '../../src/dev/broker-process.js';
import { runFiles } from '../../src/dev/kafka-config.js';
import {
  type ExtraListener,
  type LocalKafka,
  startLocalKafka,
  stopLocalKafka,
} from '../../src/dev/local-kafka.js';
import { freePort } from './ports.js';
import { TcpProxy } from './tcp-proxy.js';

/**
 * A local 3-node KRaft cluster of a test file's own, on free ports and a temporary data dir. It
 * takes over KAFKA_BROKERS for the rest of the test process (the suite's single broker is not
 * used), so the helpers of kafka.ts and spawned workers talk to the cluster. Killed on any exit.
 */
export interface TestCluster {
  kafka: LocalKafka;
  port: number;
  dataDir: string;
  brokers: string[];
  /** Node id → its PLAINTEXT address. */
  address(nodeId: number): string;
  /** The pid of a node, 0 when it is not running. */
  pid(nodeId: number): number;
  /** Signals a node's JVM (SIGKILL: a crash; SIGTERM: a controlled shutdown) and waits for it to exit unless SIGSTOP/SIGCONT. */
  signal(nodeId: number, sig: NodeJS.Signals): Promise<void>;
  /** Starts the nodes that are not running and waits until all of them are live brokers again. */
  restart(): Promise<LocalKafka>;
  stop(): Promise<void>;
}

/** A port p with p … p + n − 1 all free (they may be taken before the caller binds them). */
export async function freePortRange(n: number): Promise<number> {
  for (;;) {
    const p = await freePort();
    if (p + n > 65535) continue;
    let free = true;
    for (let i = 1; i < n && free; i++) free = !(await portInUse(p + i));
    if (free) return p;
  }
}

const live = new Set<string>();
// A signalled test process (the runner stopping it) runs no exit handlers: kill the nodes first.
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.once(sig, () => {
    killLeftNodes();
    process.exit(130);
  });
process.on('exit', killLeftNodes);
function killLeftNodes(): void {
  // Synchronous last resort: kill every node JVM whose pid file is still there.
  for (const dataDir of live)
    for (let id = 1; id <= 3; id++) {
      try {
        const pid = Number(readFileSync(runFiles(join(dataDir, `node-${id}`)).pidFile, 'utf8').trim());
        if (Number.isInteger(pid) && pid > 0) signalGroup(pid, 'SIGKILL');
      } catch {}
    }
  for (const dataDir of live) rmSync(dataDir, { recursive: true, force: true });
}

export async function startTestCluster(
  opts: { listeners?: ExtraListener[]; log?: (m: string) => void } = {},
): Promise<TestCluster> {
  delete process.env.KAFKA_BROKERS;
  for (let attempt = 1; ; attempt++) {
    const port = await freePortRange(6);
    const dataDir = await mkdtemp(join(tmpdir(), `sluice-test-cluster-${port}-`));
    live.add(dataDir);
    try {
      return await startTestClusterAt(port, dataDir, opts);
    } catch (err) {
      live.delete(dataDir);
      await rm(dataDir, { recursive: true, force: true });
      // Free when chosen is not free when bound: another process may take a port meanwhile. The
      // cluster is the fixture of these tests, not their subject (test/integration/local-kafka
      // tests the launcher): a node that died in start-up for another reason gets one more try,
      // said on stderr with the log's first errors.
      const message = String((err as Error)?.message ?? err);
      const taken = /Address already in use|BindException/.test(message);
      if (attempt >= 3 || (!taken && attempt >= 2)) throw err;
      process.stderr.write(
        `# test cluster on port ${port} failed to start (attempt ${attempt}); trying other ports: ${message}\n`,
      );
    }
  }
}

async function startTestClusterAt(
  port: number,
  dataDir: string,
  opts: { listeners?: ExtraListener[]; log?: (m: string) => void },
): Promise<TestCluster> {
  const start = () =>
    startLocalKafka({
      brokers: 3,
      port,
      dataDir,
      heapMb: 384,
      // KAFKA_BROKERS names this cluster once it runs: the launcher must not take it as external.
      env: { ...process.env, KAFKA_BROKERS: '' },
      ...(opts.listeners ? { listeners: opts.listeners } : {}),
      log: opts.log ?? (() => {}),
    });
  let kafka = await start();
  process.env.KAFKA_BROKERS = kafka.brokers.join(',');
  const nodeFiles = (id: number) => runFiles(join(dataDir, `node-${id}`));
  const pid = (id: number) => {
    try {
      return Number(readFileSync(nodeFiles(id).pidFile, 'utf8').trim()) || 0;
    } catch {
      return 0;
    }
  };
  return {
    get kafka() {
      return kafka;
    },
    port,
    dataDir,
    brokers: kafka.brokers,
    address: (id) => kafka.brokers[id - 1]!,
    pid,
    async signal(id, sig) {
      const p = pid(id);
      if (p <= 0) throw new Error(`node ${id} is not running`);
      signalGroup(p, sig);
      if (sig === 'SIGKILL' || sig === 'SIGTERM') {
        if (!(await waitForExit(p, 60_000))) throw new Error(`node ${id} (pid ${p}) did not exit on ${sig}`);
      }
    },
    async restart() {
      kafka = await start();
      return kafka;
    },
    async stop() {
      await stopLocalKafka({ port, dataDir, wipe: true }).catch(() => undefined);
      await rm(dataDir, { recursive: true, force: true });
      live.delete(dataDir);
    },
  };
}

/** Leader node id per partition of each topic (−1: none), from the cluster's metadata. */
export type Leaders = Map<string, number[]>;

/** For each node, how many of the given partitions it leads. */
export function leaderCounts(leaders: Leaders): Map<number, number> {
  const out = new Map<number, number>();
  for (const ls of leaders.values()) for (const l of ls) out.set(l, (out.get(l) ?? 0) + 1);
  return out;
}

/**
 * A test cluster whose nodes each have a second listener, PROXIED, fronted by a {@link TcpProxy}
 * of the test's: metadata served on it names the proxies' ports, so a client bootstrapped at
 * `proxiedBrokers` reaches every broker through the proxies only, and cutting them cuts it off.
 */
export async function startProxiedCluster(): Promise<{
  cluster: TestCluster;
  proxies: TcpProxy[];
  proxiedBrokers: string[];
}> {
  const listenerPorts: number[] = [];
  const proxyPorts: number[] = [];
  const taken = new Set<number>();
  while (proxyPorts.length < 3) {
    const a = await freePort();
    const b = await freePort();
    if (a === b || taken.has(a) || taken.has(b)) continue;
    taken.add(a).add(b);
    listenerPorts.push(a);
    proxyPorts.push(b);
  }
  const cluster = await startTestCluster({
    listeners: [{ name: 'PROXIED', ports: listenerPorts, advertisedPorts: proxyPorts }],
  });
  const proxies = proxyPorts.map((p, i) => new TcpProxy(p, listenerPorts[i]!));
  for (const p of proxies) await p.heal();
  return { cluster, proxies, proxiedBrokers: proxyPorts.map((p) => `127.0.0.1:${p}`) };
}

/**
 * The cluster of this test file: started before its tests (up to 4 minutes), stopped after them.
 * Call at the top level; the getter returns it once the tests run.
 */
export function fileCluster(): () => TestCluster {
  let cluster: TestCluster | undefined;
  before(
    async () => {
      cluster = await startTestCluster();
    },
    { timeout: 240_000 },
  );
  after(() => cluster?.stop());
  return () => cluster!;
}

/** Like {@link fileCluster}, the proxied cluster of this test file (its proxies cut at the end). */
export function fileProxiedCluster(): () => Awaited<ReturnType<typeof startProxiedCluster>> {
  let c: Awaited<ReturnType<typeof startProxiedCluster>> | undefined;
  before(
    async () => {
      c = await startProxiedCluster();
    },
    { timeout: 240_000 },
  );
  after(async () => {
    for (const p of c?.proxies ?? []) await p.cut();
    await c?.cluster.stop();
  });
  return () => c!;
}
