// The long run of test/integration/cluster-slow-link.test.ts: 30 s of input over the slow link
// instead of 15 (`npm run test:cluster-faults`; TEST_SLOW_LINK_SECONDS still overrides).
process.env.TEST_SLOW_LINK_SECONDS ??= '30';
await import('../integration/cluster-slow-link.test.js');
