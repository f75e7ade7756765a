// The long run of test/integration/cluster-partition.test.ts: 3 cuts instead of 1
// (`npm run test:cluster-faults`; TEST_PARTITION_CUTS still overrides).
process.env.TEST_PARTITION_CUTS ??= '3';
await import('../integration/cluster-partition.test.js');
