/**
 * What must be in place before kafkajs 2.2.4 loads: the fixed read_committed filter
 * (aborted-filter.ts) and the linear producer grouping (kafkajs-patch.ts). Every file of
 * src/kafka that imports kafkajs imports this first, so that whichever is evaluated first, kafkajs
 * loads patched.
 */
import './aborted-filter.js';
import './kafkajs-patch.js';
