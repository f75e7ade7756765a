/** Free ports on 127.0.0.1 (a race with other processes remains); for brokers, one whose next one is free too. */
export { freeBrokerPort, freePort } from '../../src/dev/broker-process.js';
