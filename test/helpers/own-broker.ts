import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { localKafkaStatus, startLocalKafka, stopLocalKafka } from '../../src/dev/local-kafka.js';
import { eventually } from './kafka.js';
import { metricSum, type WorkerProcess } from './workers.js';

/**
 * A single-node broker of a test's own (the launcher, its own port and data folder), for tests
 * that kill, stop or freeze it without touching the suite's broker. `start` points
 * KAFKA_BROKERS at it before any helper makes a client.
 */
export function ownBroker(port: number, prefix: string) {
  const dataDir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  // The launcher must start a broker even when the suite's KAFKA_BROKERS is set.
  const env = { ...process.env, KAFKA_BROKERS: '' };
  return {
    dataDir,
    async start(): Promise<void> {
      const k = await startLocalKafka({ port, dataDir, env, heapMb: 512, readyTimeoutMs: 120_000 });
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
    /** Stops the broker (thawed first, if frozen) and removes its folder. */
    async remove(): Promise<void> {
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
