/**
 * The Grafana dashboard against a real Prometheus: Debian's `prometheus` binary scrapes a worker
 * of the running-sum job every second while records flow (one of them a poison record for the
 * dead-letter metrics), then every query of every panel of grafana/dashboards/sluice.json runs
 * through Prometheus's HTTP API and must return at least one finite sample.
 *
 * Panels that use metrics another branch adds (overload) are skipped, by name, until
 * those metrics are in METRIC; any other unknown metric name fails the test.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { METRIC } from '../../src/ops/metrics.js';
import { createTopics, deleteTopicsMatching, eventually, jobTopics, testKafka } from '../helpers/kafka.js';
import { freePort } from '../helpers/ports.js';
import { spawnWorker } from '../helpers/workers.js';

const DASHBOARD = new URL('../../../grafana/dashboards/sluice.json', import.meta.url);

/** Metrics the dashboard shows that another branch defines (the overload work). */
const PENDING = new Set([
  'sluice_shed_fraction',
  'sluice_records_shed_total',
  'sluice_arrival_rate',
  'sluice_capacity',
  'sluice_recommended_workers',
]);

/**
 * METRIC entries the dashboard does not query. `sluice_checkpoint_failures_total` has a series
 * only once a checkpoint failed (its `reason` is the error's class); the Errors panel shows the
 * same events as `sluice_errors_total{kind="checkpoint"}`, which exists from the start.
 */
const NOT_ON_DASHBOARD = new Set(['sluice_checkpoint_failures_total']);

/** `$__rate_interval` for a 1 s scrape: ten samples per window. */
const RATE_INTERVAL = '10s';

interface Target {
  refId: string;
  expr: string;
}
interface Panel {
  id: number;
  type: string;
  title: string;
  targets?: Target[];
  panels?: Panel[];
}

function panelsOf(list: Panel[]): Panel[] {
  return list.flatMap((p) => [...(p.type === 'row' ? [] : [p]), ...panelsOf(p.panels ?? [])]);
}

const metricNames = new Set<string>(Object.values(METRIC).map((m) => m.name));

/** Names of sluice_ metrics an expression reads, histogram series mapped to their metric. */
function metricsOf(expr: string): string[] {
  const out = new Set<string>();
  for (const [name] of expr.matchAll(/\bsluice_[a-z0-9_]+\b/g)) {
    const base = name.replace(/_(bucket|sum|count)$/, '');
    out.add(metricNames.has(base) ? base : name);
  }
  return [...out];
}

function substitute(expr: string, vars: Record<string, string>): string {
  const out = expr.replace(/\$(__\w+|\w+)|\$\{(\w+)\}/g, (whole, a, b) => {
    const v = vars[a ?? b];
    if (v === undefined) throw new Error(`unknown template variable ${whole} in ${expr}`);
    return v;
  });
  return out;
}

function prometheusBinary(): string {
  const bin = process.env.PROMETHEUS_BIN ?? 'prometheus';
  const probe = spawnSync(bin, ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      `this test needs the prometheus binary (${bin}): apt-get install -y prometheus, or set PROMETHEUS_BIN`,
    );
  }
  return bin;
}

interface Prometheus {
  url: string;
  query(q: string): Promise<Array<{ metric: Record<string, string>; value: [number, string] }>>;
  stop(): Promise<void>;
}

async function startPrometheus(target: string): Promise<Prometheus> {
  const bin = prometheusBinary();
  const dir = mkdtempSync(join(tmpdir(), 'sluice-prometheus-'));
  const port = await freePort();
  const config = join(dir, 'prometheus.yml');
  writeFileSync(
    config,
    [
      'global:',
      '  scrape_interval: 1s',
      '  scrape_timeout: 1s',
      '  evaluation_interval: 1s',
      'scrape_configs:',
      '  - job_name: sluice',
      '    static_configs:',
      `      - targets: ['${target}']`,
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(
    bin,
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (d) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const exited = new Promise((r) => child.once('exit', r));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await eventually(
      async () => {
        if (child.exitCode !== null) throw new Error(`prometheus exited (${child.exitCode}): ${stderr}`);
        return (await fetch(`${url}/-/ready`)).ok;
      },
      { timeoutMs: 20_000, what: 'prometheus to be ready' },
    );
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    url,
    stop,
    async query(q) {
      const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(q)}`);
      const body = (await res.json()) as any;
      if (body.status !== 'success') throw new Error(`query failed: ${q}: ${body.error ?? res.status}`);
      if (body.data.resultType !== 'vector') throw new Error(`not a vector: ${q}`);
      return body.data.result;
    },
  };
}

/** Produces running-sum input in small batches until stopped: a steady ~160 records/s. */
function produceSteadily(topic: string): { stop: () => Promise<number> } {
  let running = true;
  let sent = 0;
  const done = (async () => {
    const p = testKafka().producer();
    await p.connect();
    try {
      // One poison record first: it must reach the dead-letter topic and its counter.
      await p.send({ topic, acks: -1, messages: [{ key: 'poison', value: 'not json {' }] });
      for (let batch = 0; running; batch++) {
        const messages = Array.from({ length: 40 }, (_, i) => {
          const seq = batch * 40 + i;
          const k = `k${seq % 50}`;
          return { key: k, value: JSON.stringify({ k, v: seq % 7, seq }) };
        });
        await p.send({ topic, acks: -1, messages });
        sent += messages.length;
        await new Promise((r) => setTimeout(r, 250));
      }
    } finally {
      await p.disconnect();
    }
  })();
  return {
    stop: async () => {
      running = false;
      await done;
      return sent;
    },
  };
}

test('every panel query of the Grafana dashboard should return data from Prometheus scraping a worker under load', async (t) => {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8'));
  const panels = panelsOf(dashboard.panels);
  assert.ok(panels.length >= 20, `expected a full dashboard, found ${panels.length} panels`);

  // Names first: a typo in a metric name must fail, not be skipped.
  const used = new Set<string>();
  for (const p of panels) for (const tg of p.targets ?? []) for (const m of metricsOf(tg.expr)) used.add(m);
  const unknown = [...used].filter(
    (m) => !metricNames.has(m) && !PENDING.has(m) && !m.startsWith('sluice_node_'),
  );
  assert.deepEqual(unknown, [], `the dashboard queries metrics that nobody defines: ${unknown.join(', ')}`);
  const unshown = [...metricNames].filter((m) => !used.has(m) && !NOT_ON_DASHBOARD.has(m));
  assert.deepEqual(unshown, [], `metrics of METRIC that no panel shows: ${unshown.join(', ')}`);

  const { id, input, env } = await jobTopics('t-grafana', 2);
  // The running sum plus a windowed count, so the late-record panel has its (zero) series.
  // And an async stage, for the async panels.
  await createTopics([
    { topic: `${id}-windows`, partitions: 2 },
    { topic: `${id}-async`, partitions: 2 },
  ]);
  const worker = spawnWorker('running-sum', {
    name: 'grafana-worker',
    env: { ...env, TEST_WINDOW_OUTPUT: `${id}-windows`, TEST_ASYNC_OUTPUT: `${id}-async` },
  });
  const load = produceSteadily(input);
  let prom: Prometheus | undefined;
  // In this order: no producer or scraper left talking to a worker or topics that are gone.
  t.after(async () => {
    await load.stop().catch(() => undefined);
    await prom?.stop();
    await worker.kill('SIGKILL');
    await deleteTopicsMatching(id);
  });

  prom = await startPrometheus(new URL(await worker.url()).host);
  const p = prom;

  // Wait until Prometheus holds several scrapes of a worker that processes, checkpoints and
  // dead-lettered the poison record, so that rate() over RATE_INTERVAL has samples to work on.
  const app = JSON.stringify(id);
  await eventually(
    async () => {
      const dlq = await p.query(`sluice_records_dead_lettered_total{app=${app},reason="deserialize"} > 0`);
      const flowing = await p.query(`rate(sluice_records_out_total{app=${app}}[${RATE_INTERVAL}]) > 0`);
      const samples = await p.query(
        `count_over_time(sluice_checkpoints_total{app=${app}}[${RATE_INTERVAL}]) >= 5`,
      );
      return dlq.length > 0 && flowing.length > 0 && samples.length > 0;
    },
    { timeoutMs: 40_000, intervalMs: 500, what: 'Prometheus to scrape a worker that processes records' },
  );

  const vars = {
    app: id.replace(/[.*+?^${}()|[\]\\]/g, '\\\\$&'),
    instance: '.*',
    datasource: 'prometheus',
    __rate_interval: RATE_INTERVAL,
    __interval: '1s',
    __range: '5m',
  };
  let checked = 0;
  for (const panel of panels) {
    const pending = [...new Set((panel.targets ?? []).flatMap((tg) => metricsOf(tg.expr)))].filter((m) =>
      PENDING.has(m),
    );
    const pendingMissing = pending.filter((m) => !metricNames.has(m));
    if (pendingMissing.length > 0) {
      const why = `panel "${panel.title}" skipped: ${pendingMissing.join(', ')} not in METRIC yet`;
      t.diagnostic(why);
      await t.test(panel.title, { skip: why }, () => undefined);
      continue;
    }
    await t.test(panel.title, async () => {
      assert.ok((panel.targets ?? []).length > 0, 'a panel without queries');
      for (const tg of panel.targets!) {
        const q = substitute(tg.expr, vars);
        let last: unknown;
        const ok = await eventually(
          async () => {
            const r = await p.query(q);
            last = r.map((s) => s.value[1]);
            return r.some((s) => Number.isFinite(Number(s.value[1])));
          },
          { timeoutMs: 15_000, intervalMs: 500, what: `data for ${tg.refId}: ${q}` },
        ).catch((e: Error) => new Error(`${e.message}; last result ${JSON.stringify(last)}`));
        if (ok instanceof Error) assert.fail(ok.message);
        checked++;
      }
    });
  }
  t.diagnostic(`${checked} queries returned data`);
  const sent = await load.stop();
  t.diagnostic(`produced ${sent} records while Prometheus scraped`);
  assert.ok(checked > 0);
});
