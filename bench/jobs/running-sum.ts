/**
 * Bench workload: the keyed running sum (issue 14). A `process` with one `valueState` on the
 * source key (the input is keyed by user, so no repartition) that emits the running sum and count
 * of the record's user for every record: every update is an output, as the Kafka Streams twin
 * (`running-sum` in bench/peers/kafka-streams/.../BenchApp.java: Processor API, a KeyValueStore,
 * `forward` on every record). The output keeps the input's timestamp (the latency bench reads it).
 */
import { App, json, string, valueState } from 'sluice';
import type { BenchEvent } from '../workloads.js';

const state = { acc: valueState<{ sum: number; n: number }>() };

const app = new App({ id: process.env.BENCH_APP_ID ?? 'bench-running-sum' });
app
  .keyedStream(process.env.BENCH_INPUT ?? 'bench-in', { key: string(), value: json<BenchEvent>() })
  .process<{ user: string; sum: number; n: number; seq: number }, typeof state>(
    {
      state,
      onRecord(e, ctx) {
        const prev = ctx.state.acc.get();
        const sum = (prev ? prev.sum : 0) + e.amount;
        const n = (prev ? prev.n : 0) + 1;
        ctx.state.acc.set({ sum, n });
        ctx.emit({ user: e.user, sum, n, seq: e.seq });
      },
    },
    { name: 'sums' },
  )
  .to(process.env.BENCH_OUTPUT ?? 'bench-out', { key: string(), value: json() });

export default app;
