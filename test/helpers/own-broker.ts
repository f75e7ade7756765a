import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freeBrokerPort } from '../../src/dev/broker-process.js';
import { runFiles } from '../../src/dev/kafka-config.js';
import { localKafkaStatus, startLocalKafka, stopLocalKafka } from '../../src/dev/local-kafka.js';
import { eventually } from './kafka.js';
import { metricSum, type WorkerProcess } from './workers.js';

/**
 * The Kafka a broker-restart fault runs on: the newest release whose transaction coordinator,
 * loading its log after an unclean restart, keeps the markers of a partition that has no leader
 * yet and sends them once it has one (4.0.2, 4.1.2 and 4.2.2 checked). 4.3.1 and 4.4.0 drop them
 * instead, as if the partition were deleted (KAFKA-20734: their Java KRaftMetadataCache's
 * getPartitionLeaderEndpoint answers "no such partition" for a leader that is offline, where the
 * Scala one before it answered "no node yet"). A single node SIGKILLed while a
 * transaction is between EndTxn and its markers then leaves that transaction without markers
 * where its leader was not back yet: a hanging transaction (read_committed stops there) or an
 * offset commit that never becomes visible (the next owner resumes behind its state). No client
 * can make up for that, so a test of Sluice restarts a broker that does not do it; set
 * TEST_KAFKA_RESTART_VERSION to run one on another version (4.4.0 shows the fault).
 */
export const RESTART_FAULT_KAFKA = process.env.TEST_KAFKA_RESTART_VERSION || '4.2.2';

/**
 * The port for a test's own broker (it also takes the next one, for its controller): `fromEnv`
 * when set, else two free ports below the kernel's ephemeral range. A fixed port inside that
 * range (39792) was once taken by an outgoing connection's local port while the broker was down,
 * and the broker could not start again ("Address already in use", a CI run of broker-outage).
 */
export async function ownBrokerPort(fromEnv: string | undefined): Promise<number> {
  return fromEnv ? Number(fromEnv) : freeBrokerPort();
}

/**
 * A single-node broker of a test's own (the launcher, its own port and data folder), for tests
 * that kill, stop or freeze it without touching the suite's broker. `start` points
 * KAFKA_BROKERS at it before any helper makes a client. `version`: default the suite's.
 */
export function ownBroker(port: number, prefix: string, opts: { version?: string } = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  // The launcher must start a broker even when the suite's KAFKA_BROKERS is set.
  const env = { ...process.env, KAFKA_BROKERS: '' };
  return {
    dataDir,
    async start(): Promise<void> {
      const k = await startLocalKafka({
        port,
        dataDir,
        env,
        heapMb: 512,
        readyTimeoutMs: 120_000,
        ...(opts.version ? { version: opts.version } : {}),
      });
      process.env.KAFKA_BROKERS = k.brokers.join(',');
    },
    stop: () => stopLocalKafka({ port, dataDir, env }),
    /** The broker's process group id (the launcher's), to signal. */
    async pid(): Promise<number> {
      const s = await localKafkaStatus({ port, dataDir, env });
      if (!s.pid) throw new Error(`no broker running on port ${port}`);
      return s.pid;
    },
    /**
     * Once the workers' first output for `output` is out, sends `signal` to the broker's process
     * group: a fault mid-stream. Returns its pid and the outputs written by then.
     */
    async signalMidStream(
      signal: NodeJS.Signals,
      workers: WorkerProcess[],
      output: string,
    ): Promise<{ pid: number; outputs: number }> {
      await eventually(async () => (await outputCount(workers, output)) > 0, {
        timeoutMs: 60_000,
        intervalMs: 50,
        what: 'first output',
      });
      const pid = await this.pid();
      const outputs = await outputCount(workers, output);
      process.kill(-pid, signal);
      return { pid, outputs };
    },
    /**
     * Stops the broker (thawed first, if frozen) and removes its folder; with TEST_KEEP_BROKER=1
     * it leaves both, to read a failed run's topics and logs (stop it with `sluice kafka stop`).
     */
    async remove(): Promise<void> {
      // The broker's own account of KAFKA-20734 (see RESTART_FAULT_KAFKA), for a failed run's log.
      const log = runFiles(dataDir).logFile;
      const skipped = existsSync(log)
        ? readFileSync(log, 'utf8')
            .split('\n')
            .filter((l) => l.includes('likely deleted already'))
        : [];
      if (skipped.length > 0)
        process.stderr.write(
          `broker skipped transaction markers ${skipped.length} times:\n${skipped.join('\n')}\n`,
        );
      if (process.env.TEST_KEEP_BROKER) {
        process.stderr.write(`kept: broker on port ${port}, data in ${dataDir}\n`);
        return;
      }
      const s = await localKafkaStatus({ port, dataDir, env }).catch(() => undefined);
      if (s?.pid) {
        try {
          process.kill(-s.pid, 'SIGCONT');
        } catch {}
      }
      await stopLocalKafka({ port, dataDir, env }).catch(() => undefined);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Records the live workers wrote to `topic` (their `sluice_records_out_total`). */
async function outputCount(workers: WorkerProcess[], topic: string): Promise<number> {
  let n = 0;
  for (const w of workers) {
    if (w.child.exitCode !== null || w.child.signalCode !== null) continue;
    n += metricSum(await w.metrics().catch(() => ''), 'sluice_records_out_total', { topic });
  }
  return n;
}

/** Whether every worker's /readyz answers 200. */
export async function allReady(workers: WorkerProcess[]): Promise<boolean> {
  const codes = await Promise.all(workers.map(async (w) => (await fetch(`${await w.url()}/readyz`)).status));
  return codes.every((s) => s === 200);
}
