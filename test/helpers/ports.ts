import { freePorts } from '../../src/dev/broker-process.js';

/** For brokers: a free port whose next one (the controller's) is free too. */
export { freeBrokerPort } from '../../src/dev/broker-process.js';

/** One port the OS reports free at 127.0.0.1 (a race with other processes remains). */
export async function freePort(): Promise<number> {
  return (await freePorts(1))[0]!;
}
