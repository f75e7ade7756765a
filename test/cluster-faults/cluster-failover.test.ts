// The long run of test/integration/cluster-failover.test.ts: 2 rounds of a leader SIGKILL and
// 30 000 records in 40 s instead of 1 round and 15 000 in 30 s (`npm run test:cluster-faults`;
// the TEST_FAILOVER_* variables still override).
process.env.TEST_FAILOVER_ROUNDS ??= '2';
process.env.TEST_FAILOVER_RECORDS ??= '30000';
process.env.TEST_FAILOVER_SLICES ??= '40';
await import('../integration/cluster-failover.test.js');
