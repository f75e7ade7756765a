import { type EventLoopUtilization, performance } from 'node:perf_hooks';
import type { SluiceConfig } from '../config/schema.js';
import type { KafkaAdmin } from '../kafka/admin.js';
import type { Logger } from '../ops/logger.js';
import type { WorkerMetrics } from '../ops/metrics.js';
import { ArrivalRate, Capacity, Ewma, OutOfChainCost } from './estimators.js';
import type { OperatorCostSampler } from './operator-cost.js';
import { demand, recommendWorkers, shedFraction, smoothShed, type TaskLoad } from './policy.js';
import type { TaskCounts, TaskShedder } from './shedder.js';

/** What the controller needs of a task (the runtime's Task satisfies it). */
export interface OverloadTask {
  readonly id: string;
  readonly partition: number;
  readonly inputTopics: readonly string[];
  readonly shedder: TaskShedder;
  readonly costs: OperatorCostSampler;
  /** Next offset the task will process on `topic`; undefined before it knows. */
  positionOf(topic: string): bigint | undefined;
}

export interface OverloadControllerDeps {
  appId: string;
  groupId: string;
  config: Readonly<SluiceConfig['overload']>;
  logger: Logger;
  metrics: WorkerMetrics;
  admin: () => Promise<KafkaAdmin>;
  /** Tasks owned by this worker now. */
  tasks: () => Iterable<OverloadTask>;
  /** Input topics per sub-topology (every one, owned or not: the advisor sees the whole group). */
  subtopologies: ReadonlyArray<{ id: number; sourceTopics: readonly string[] }>;
  /** Repartition topics: their λ is what upstream kept, so shedding upstream lowers it. */
  isInternal: (topic: string) => boolean;
  /** Partition count per sub-topology, once known. */
  partitions: () => ReadonlyMap<number, number>;
  /**
   * The backlog of an owned partition as the last fetch saw it (`sluice_consumer_lag`: records
   * in the log at fetch time that the fetch did not return). Unlike log end − position, it does not
   * count the records of the batch in hand, which need no draining.
   */
  lagOf?: (topic: string, partition: number) => number | undefined;
}

export interface OverloadStatus {
  mode: string;
  headroom: number;
  latencyTargetMs: number;
  /** The shed fraction applied now. */
  shedFraction: number;
  /** Busy seconds per second this worker would need (U); above `headroom` it sheds. */
  utilisation: number;
  shedding: boolean;
  recommendedWorkers: number | null;
  groupDemand: number | null;
  /**
   * How C charges the event loop's work outside the operator chains: `fit` the per-record part of
   * the least-squares split (per ms, per batch, per record; milliseconds), or `ratio` the loop's
   * active time over the chains' busy time (`overheadFactor`) when the fit is not trustworthy.
   */
  outOfChain: {
    charged: 'fit' | 'ratio';
    perRecordMs: number | null;
    perBatchMs: number | null;
    overheadFactor: number;
  };
  tasks: Array<{
    id: string;
    arrivalRate: number;
    lag: number;
    capacity: number | null;
    shedFraction: number;
  }>;
}

/**
 * The overload loop of one worker, every `evaluateIntervalMs`:
 *
 *   1. log-end offsets of every input partition (admin ListOffsets) → λ per partition;
 *      the group's committed offsets → lag of the partitions other workers own;
 *   2. each task's processed records and busy time → C per task;
 *   3. U = Σ_t (λ_t + lag_t/τ) / C_t, p = max(0, 1 − H/U), smoothed; set on every task that sheds;
 *   4. DS2: workers = ⌈Σ_partitions (λ + lag/τ) / C / H⌉ clamped to [1, partitions];
 *   5. metrics, and one log line when shedding starts and one when it stops.
 */
export class OverloadController {
  readonly #d: OverloadControllerDeps;
  readonly #rates = new Map<string, ArrivalRate>();
  readonly #high = new Map<string, bigint>();
  readonly #committed = new Map<string, bigint>();
  readonly #capacity = new Map<string, Capacity>();
  readonly #exportedPartitions = new Set<string>();
  readonly #exportedTasks = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #running = false;
  #p = 0;
  #status: OverloadStatus;
  #episode: { since: number; shed: number; maxP: number } | undefined;
  #elu: EventLoopUtilization = performance.eventLoopUtilization();
  readonly #opCost = new Map<string, Ewma>();
  readonly #loopCost = new OutOfChainCost();

  constructor(d: OverloadControllerDeps) {
    this.#d = d;
    this.#status = {
      mode: d.config.mode,
      headroom: d.config.headroom,
      latencyTargetMs: d.config.latencyTargetMs,
      shedFraction: 0,
      utilisation: 0,
      shedding: false,
      recommendedWorkers: null,
      groupDemand: null,
      outOfChain: { charged: 'ratio', perRecordMs: null, perBatchMs: null, overheadFactor: 1 },
      tasks: [],
    };
  }

  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.evaluate(), this.#d.config.evaluateIntervalMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  status(): OverloadStatus {
    return this.#status;
  }

  /** One evaluation (exported for tests; the timer calls it). Never throws. */
  async evaluate(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    try {
      await this.#poll();
      this.#decide();
    } catch (e) {
      this.#d.logger.debug({ err: e }, 'overload evaluation skipped (offsets not available)');
    } finally {
      this.#running = false;
    }
  }

  async #poll(): Promise<void> {
    const admin = await this.#d.admin();
    const topics = this.#d.subtopologies.flatMap((s) => s.sourceTopics);
    const alpha = this.#d.config.smoothing;
    for (const topic of topics) {
      const offs = await admin.offsets(topic);
      const now = Date.now();
      for (const o of offs) {
        const k = `${topic}:${o.partition}`;
        const high = BigInt(o.high);
        this.#high.set(k, high);
        let r = this.#rates.get(k);
        if (!r) this.#rates.set(k, (r = new ArrivalRate(alpha)));
        r.observe(high, now);
      }
    }
    for (const c of await admin.committedOffsets(this.#d.groupId, topics)) {
      const off = BigInt(c.offset);
      if (off >= 0n) this.#committed.set(`${c.topic}:${c.partition}`, off);
    }
  }

  #decide(): void {
    const { appId, metrics, config } = this.#d;
    const tau = config.latencyTargetMs / 1000;
    // Upstream shedding lowers what reaches a repartition topic: scale it back up so that U is
    // the demand without shedding, else p would oscillate between shedding and not.
    const keep = Math.max(0.05, 1 - this.#p);
    const rateOf = (topic: string, partition: number) => {
      const r = this.#rates.get(`${topic}:${partition}`)?.value ?? 0;
      return this.#d.isInternal(topic) && config.placement === 'source' ? r / keep : r;
    };
    const loads: Array<TaskLoad & { task: OverloadTask }> = [];
    const ownedPartitions = new Set<string>();
    let shedNow = 0;
    const tasks = [...this.#d.tasks()];
    const counted = tasks.map((t) => t.shedder.collect());
    const loop = this.#outOfChain(counted);
    for (let i = 0; i < tasks.length; i++) {
      const task = tasks[i]!;
      const counts = counted[i]!;
      shedNow += counts.shed;
      let cap = this.#capacity.get(task.id);
      if (!cap) this.#capacity.set(task.id, (cap = new Capacity(config.smoothing)));
      const busyMs =
        loop.perRecordMs !== undefined
          ? counts.busyMs + loop.perRecordMs * counts.processed
          : counts.busyMs * loop.factor;
      const capacity = cap.observe(counts.processed, busyMs);
      let lambda = 0;
      let lag = 0;
      for (const topic of task.inputTopics) {
        const k = `${topic}:${task.partition}`;
        ownedPartitions.add(k);
        const rate = rateOf(topic, task.partition);
        lambda += rate;
        lag += this.#lagOf(task, topic);
        metrics.arrivalRate.set({ app: appId, topic, partition: String(task.partition) }, rate);
      }
      loads.push({ task, lambda, lag, capacity });
      if (capacity !== undefined) metrics.capacity.set({ app: appId, task: task.id }, capacity);
    }
    this.#operatorCosts(tasks);
    const u = demand(loads, tau);
    const raw = config.mode === 'backpressure' ? 0 : shedFraction(u, config.headroom);
    this.#p = smoothShed(this.#p, raw, config.smoothing);
    const taskStatus: OverloadStatus['tasks'] = [];
    for (const l of loads) {
      // At the source, only tasks that read an external topic drop (their drops relieve the rest).
      const applies =
        config.placement === 'operator' || l.task.inputTopics.some((t) => !this.#d.isInternal(t));
      const p = applies ? this.#p : 0;
      l.task.shedder.setFraction(p);
      metrics.shedFraction.set({ app: appId, task: l.task.id }, l.task.shedder.p);
      taskStatus.push({
        id: l.task.id,
        arrivalRate: round(l.lambda),
        lag: l.lag,
        capacity: l.capacity === undefined ? null : round(l.capacity),
        shedFraction: round(l.task.shedder.p, 4),
      });
    }
    this.#forget(ownedPartitions, new Set(loads.map((l) => l.task.id)));
    const advice = this.#advise(loads, tau, rateOf);
    if (advice) metrics.recommendedWorkers.set({ app: appId }, advice.workers);
    this.#logEpisode(u, loads, shedNow);
    this.#status = {
      mode: config.mode,
      headroom: config.headroom,
      latencyTargetMs: config.latencyTargetMs,
      shedFraction: round(this.#p, 4),
      utilisation: round(u, 4),
      shedding: this.#p > 0,
      recommendedWorkers: advice?.workers ?? null,
      groupDemand: advice ? round(advice.demand, 4) : null,
      outOfChain: {
        charged: loop.perRecordMs !== undefined ? 'fit' : 'ratio',
        perRecordMs: loop.fit ? round(loop.fit.perRecord, 5) : null,
        perBatchMs: loop.fit ? round(loop.fit.perBatch, 4) : null,
        overheadFactor: round(loop.factor, 4),
      },
      tasks: taskStatus,
    };
  }

  /** DS2 over every input partition of the group, with this worker's measured capacities. */
  #advise(
    loads: ReadonlyArray<TaskLoad & { task: OverloadTask }>,
    tau: number,
    rateOf: (topic: string, partition: number) => number,
  ): { workers: number; demand: number } | undefined {
    const capOfTopic = new Map<string, number[]>();
    const all: number[] = [];
    for (const l of loads) {
      if (l.capacity === undefined) continue;
      all.push(l.capacity);
      for (const t of l.task.inputTopics) {
        let list = capOfTopic.get(t);
        if (!list) capOfTopic.set(t, (list = []));
        list.push(l.capacity);
      }
    }
    if (all.length === 0) return undefined;
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const fallback = mean(all);
    const owned = new Map<string, number>();
    for (const l of loads)
      for (const t of l.task.inputTopics) owned.set(`${t}:${l.task.partition}`, this.#lagOf(l.task, t));
    let total = 0;
    for (const s of this.#d.subtopologies) {
      const n = this.#d.partitions().get(s.id) ?? 0;
      for (const topic of s.sourceTopics) {
        const caps = capOfTopic.get(topic);
        const c = caps ? mean(caps) : fallback;
        for (let p = 0; p < n; p++) {
          const k = `${topic}:${p}`;
          const high = this.#high.get(k);
          const committed = this.#committed.get(k);
          const lag =
            owned.get(k) ??
            (high !== undefined && committed !== undefined && high > committed
              ? Number(high - committed)
              : 0);
          total += (rateOf(topic, p) + lag / tau) / c;
        }
      }
    }
    const maxWorkers = Math.max(1, ...this.#d.partitions().values());
    return { workers: recommendWorkers(total, this.#d.config.headroom, maxWorkers), demand: total };
  }

  /**
   * What C charges for the event loop's work outside the operator chains (fetching, decoding,
   * producing, committing, heartbeats, metrics), which the tasks share. DS2's "true processing
   * rate" counts all useful work, but C must be the rate the worker would sustain saturated, and
   * only part of that work grows with the records: per-batch work (a fetch round, a checkpoint's
   * transaction) is large per record when batches are small, as they are when the worker sheds
   * (the loop keeps 1 − H idle and waits for fetches) or is lightly loaded, and small when it is
   * saturated and every fetch is full. So each interval's out-of-chain time is fitted over a
   * sliding window as per interval + per batch + per record (`OutOfChainCost`), and a record is charged
   * its chain time plus the per-record part.
   *
   * Until the window can tell them apart (a steady load from the start: records per interval
   * about constant), the loop's active time over the chains' busy time is the factor, as before:
   * 1 below half busy (the loop's other work is then mostly polling fetches that cost the same at
   * any load), phased in between 50 % and 90 % busy so that C does not jump as the load crosses
   * half, and capped at +25 % (beyond that it is per-batch work, whose charge to fewer kept records
   * would spiral: more shedding, a lower C, more shedding).
   */
  #outOfChain(counted: readonly TaskCounts[]): {
    perRecordMs: number | undefined;
    factor: number;
    fit: ReturnType<OutOfChainCost['fit']>;
  } {
    const now = performance.eventLoopUtilization();
    const d = performance.eventLoopUtilization(now, this.#elu);
    this.#elu = now;
    let chainMs = 0;
    let busyMs = 0;
    let batches = 0;
    let records = 0;
    let processed = 0;
    for (const c of counted) {
      chainMs += c.chainMs;
      busyMs += c.busyMs;
      batches += c.batches;
      records += c.handled;
      processed += c.processed;
    }
    this.#loopCost.observe({ outMs: d.active - chainMs, batches, records });
    const fit = this.#loopCost.fit();
    const perRecordMs = processed > 0 ? this.#loopCost.perRecordMs(chainMs / processed) : undefined;
    let factor = 1;
    if (busyMs >= 5 && d.utilization >= 0.5) {
      const full = Math.min(MAX_OVERHEAD, Math.max(1, d.active / busyMs));
      factor = 1 + (full - 1) * Math.min(1, (d.utilization - 0.5) / 0.4);
    }
    return { perRecordMs, factor, fit };
  }

  /** Per-operator cost over all tasks (operators of one name are one operator in the job). */
  #operatorCosts(tasks: readonly OverloadTask[]): void {
    const sums = new Map<string, { ms: number; n: number }>();
    for (const t of tasks)
      for (const [name, c] of t.costs.collect()) {
        const s = sums.get(name);
        if (s) {
          s.ms += c.ms;
          s.n += c.n;
        } else sums.set(name, { ...c });
      }
    for (const [name, c] of sums) {
      let e = this.#opCost.get(name);
      if (!e) this.#opCost.set(name, (e = new Ewma(this.#d.config.smoothing)));
      this.#d.metrics.operatorCost.set({ app: this.#d.appId, operator: name }, e.update(c.ms / c.n / 1000));
    }
  }

  #lagOf(task: OverloadTask, topic: string): number {
    const fetched = this.#d.lagOf?.(topic, task.partition);
    if (fetched !== undefined) return fetched;
    const high = this.#high.get(`${topic}:${task.partition}`);
    const pos = task.positionOf(topic);
    return high !== undefined && pos !== undefined && high > pos ? Number(high - pos) : 0;
  }

  #logEpisode(u: number, loads: ReadonlyArray<TaskLoad>, shedNow: number): void {
    const lambda = round(loads.reduce((a, l) => a + l.lambda, 0));
    const lag = loads.reduce((a, l) => a + l.lag, 0);
    if (this.#p > 0 && !this.#episode) {
      this.#episode = { since: Date.now(), shed: shedNow, maxP: this.#p };
      this.#d.logger.warn(
        {
          event: 'shedding_started',
          mode: this.#d.config.mode,
          shedFraction: round(this.#p, 4),
          utilisation: round(u, 4),
          headroom: this.#d.config.headroom,
          arrivalRate: lambda,
          lag,
        },
        'overload: shedding started',
      );
    } else if (this.#episode) {
      this.#episode.shed += shedNow;
      this.#episode.maxP = Math.max(this.#episode.maxP, this.#p);
      if (this.#p === 0) {
        this.#d.logger.info(
          {
            event: 'shedding_stopped',
            mode: this.#d.config.mode,
            durationMs: Date.now() - this.#episode.since,
            shedRecords: this.#episode.shed,
            maxShedFraction: round(this.#episode.maxP, 4),
            utilisation: round(u, 4),
            arrivalRate: lambda,
          },
          'overload: shedding stopped',
        );
        this.#episode = undefined;
      }
    }
  }

  /** Drops the gauges of partitions and tasks this worker no longer owns. */
  #forget(partitions: Set<string>, tasks: Set<string>): void {
    const appId = this.#d.appId;
    for (const k of this.#exportedPartitions) {
      if (partitions.has(k)) continue;
      const i = k.lastIndexOf(':');
      this.#d.metrics.arrivalRate.remove({ app: appId, topic: k.slice(0, i), partition: k.slice(i + 1) });
      this.#exportedPartitions.delete(k);
    }
    for (const k of partitions) this.#exportedPartitions.add(k);
    for (const id of this.#exportedTasks) {
      if (tasks.has(id)) continue;
      this.#d.metrics.capacity.remove({ app: appId, task: id });
      this.#d.metrics.shedFraction.remove({ app: appId, task: id });
      this.#capacity.delete(id);
      this.#exportedTasks.delete(id);
    }
    for (const id of tasks) this.#exportedTasks.add(id);
  }
}

const MAX_OVERHEAD = 1.25;

function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
