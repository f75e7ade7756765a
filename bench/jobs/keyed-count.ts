/**
 * Bench workload (b): a running count per key over a topic already keyed by that key (no
 * repartition, as Kafka Streams' `groupByKey().count()`). Emits the new count for every record.
 */
import { App, json, number, string } from 'sluice';
import type { BenchEvent } from '../workloads.js';

const app = new App({ id: process.env.BENCH_APP_ID ?? 'bench-keyed-count' });
app
  .keyedStream(process.env.BENCH_INPUT ?? 'bench-in', { key: string(), value: json<BenchEvent>() })
  .count({ name: 'counts' })
  .to(process.env.BENCH_OUTPUT ?? 'bench-out', { key: string(), value: number() });

export default app;
