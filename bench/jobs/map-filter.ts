/**
 * Bench workload (a): stateless map + filter. Keeps clicks and buys (drops views, about 1/2 of the
 * input) and projects three fields. The Kafka Streams twin is `map-filter` in
 * bench/peers/kafka-streams/src/main/java/sluice/bench/BenchApp.java.
 */
import { App, json, string } from 'sluice';
import type { BenchEvent } from '../workloads.js';

const app = new App({ id: process.env.BENCH_APP_ID ?? 'bench-map-filter' });
app
  .stream(process.env.BENCH_INPUT ?? 'bench-in', { key: string(), value: json<BenchEvent>() })
  .filter((e) => e.kind !== 'view')
  .map((e) => ({ user: e.user, page: e.page, cents: e.amount * 100 }))
  .to(process.env.BENCH_OUTPUT ?? 'bench-out', { key: string(), value: json() });

export default app;
