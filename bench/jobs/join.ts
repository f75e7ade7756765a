/**
 * Bench workload (d): a stream-table join. Clicks keyed by user join the users table (same key,
 * same partition count), emitting the click with the user's tier; clicks without a row are dropped
 * (inner join), as Kafka Streams' `KStream.join(KTable, …)`.
 */
import { App, json, string } from 'sluice';
import type { BenchEvent } from '../workloads.js';

interface User {
  user: string;
  name: string;
  tier: string;
  region: string;
}

const app = new App({ id: process.env.BENCH_APP_ID ?? 'bench-join' });
const users = app.table(process.env.BENCH_TABLE ?? 'bench-users', { key: string(), value: json<User>() });
app
  .keyedStream(process.env.BENCH_INPUT ?? 'bench-in', { key: string(), value: json<BenchEvent>() })
  .join(users, (click, user) => ({ user: click.user, page: click.page, tier: user.tier }), {
    name: 'with-user',
  })
  .to(process.env.BENCH_OUTPUT ?? 'bench-out', { key: string(), value: json() });

export default app;
