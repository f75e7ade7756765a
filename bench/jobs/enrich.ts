/**
 * Bench workload: enrichment, stateless (issue 14). Every record is parsed, gets computed fields
 * and is re-serialized: one output per input. The Kafka Streams twin (`enrich` in
 * bench/peers/kafka-streams/.../BenchApp.java) builds the same fields in the same order.
 */
import { App, json, string } from 'sluice';
import type { BenchEvent } from '../workloads.js';

const app = new App({ id: process.env.BENCH_APP_ID ?? 'bench-enrich' });
app
  .stream(process.env.BENCH_INPUT ?? 'bench-in', { key: string(), value: json<BenchEvent>() })
  .map((e) => ({
    user: e.user,
    page: e.page,
    kind: e.kind,
    amount: e.amount,
    seq: e.seq,
    cents: e.amount * 100,
    pageId: Number.parseInt(e.page.slice(3), 10),
    big: e.amount >= 250,
    label: `${e.kind}:${e.user}`,
  }))
  .to(process.env.BENCH_OUTPUT ?? 'bench-out', { key: string(), value: json() });

export default app;
