/**
 * Bench workload (c): a count per key in tumbling 10 s event-time windows (the Yahoo streaming
 * benchmark's shape), no grace, an updated count on every record — what Kafka Streams'
 * `windowedBy(TimeWindows.ofSizeWithNoGrace(10 s)).count()` emits (before its record cache).
 * Event time = the Kafka record timestamp.
 */
import { App, json, string, tumbling } from 'sluice';
import type { BenchEvent } from '../workloads.js';

const app = new App({ id: process.env.BENCH_APP_ID ?? 'bench-window-count' });
app
  .keyedStream(process.env.BENCH_INPUT ?? 'bench-in', { key: string(), value: json<BenchEvent>() })
  .window(tumbling(10_000), { grace: 0, emit: 'update' })
  .count({ name: 'window-counts' })
  .to(process.env.BENCH_OUTPUT ?? 'bench-out', { key: string(), value: json() });

export default app;
