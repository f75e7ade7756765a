/**
 * `sluice/testing`: a deterministic test driver for Sluice jobs, without a broker. It runs the
 * worker's own code (tasks, operators, RocksDB state, timers, windows, joins, error policies,
 * checkpoints, restore) against an in-memory Kafka.
 * @example
 * import { TestDriver } from 'sluice/testing';
 * const driver = new TestDriver(app, { partitions: 4 });
 * await driver.input('clicks').pipe('u1', { page: '/' });
 * driver.output('counts').readAll(); // [{ key: 'u1', value: 1, timestamp, partition, offset, headers }]
 * await driver.close();
 */
export {
  type DeadLetter,
  type OutputRecord,
  type PipeOptions,
  TestInput,
  TestOutput,
} from './records.js';
export { type SimRecord, SimulatedKafka } from './sim-kafka.js';
export type { StateView } from './state-view.js';
export { type CommitMode, TestDriver, type TestDriverOptions } from './test-driver.js';
