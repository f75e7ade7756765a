/**
 * What must be in place before kafkajs 2.2.4 loads: the fixed read_committed filter
 * (aborted-filter.ts), the in-place fetch decoder and numeric Batch offset filter
 * (fetch-decoder.ts, after the filter), the linear producer grouping (kafkajs-patch.ts), the
 * one-buffer produce request encoder (produce-encoder.ts), static group membership
 * (kafkajs-static.ts, last: it loads kafkajs's consumer and index), and TxnOffsetCommit v3 and
 * OffsetFetch v7 for exactly-once v2 (kafkajs-txn-v3.ts, on Broker's prototype: in any order), and
 * an offset-out-of-range reset that commits nothing (kafkajs-offset-reset.ts, on a prototype too),
 * request queues that poll only while a request waits (kafkajs-request-queue.ts, likewise), and the
 * fetch guard's hooks (kafkajs-fetch-guard.ts, likewise).
 * Every file of src/kafka that imports kafkajs imports this first, so that whichever is evaluated
 * first, kafkajs loads patched. {@link assertKafkajsPatched} (called by every KafkaClient) fails
 * the worker at start when any of them did not install, or kafkajs is not the version they were
 * written for.
 */
import { createRequire } from 'node:module';
import { SluiceError } from '../errors.js';
import { abortedFilterInstalled } from './aborted-filter.js';
import { batchFilterPatched, fetchDecoderPatched } from './fetch-decoder.js';
import { fetchGuardPatched } from './kafkajs-fetch-guard.js';
import { offsetResetPatched } from './kafkajs-offset-reset.js';
import { kafkajsGroupingPatched, kafkajsProducerPatched, kafkajsSendPatched } from './kafkajs-patch.js';
import { requestQueuePatched } from './kafkajs-request-queue.js';
import { staticMembershipInstalled, staticMembershipProblem } from './kafkajs-static.js';
import { txnV3Installed, txnV3Problem } from './kafkajs-txn-v3.js';
import { produceEncoderPatched } from './produce-encoder.js';

/** The one kafkajs version whose internals src/kafka patches (package.json pins it). */
export const KAFKAJS_VERSION = '2.2.4';

export interface KafkajsPatchStatus {
  /** kafkajs's package.json version, as installed. */
  version: string;
  /** Each load-time change and whether it is in effect. */
  patches: Record<string, boolean>;
  /** Why a patch did not install, where known. */
  problems?: readonly string[];
}

/** What is installed now. */
export function kafkajsPatchStatus(): KafkajsPatchStatus {
  const require = createRequire(import.meta.url);
  let version: string;
  try {
    version = String(require('kafkajs/package.json').version);
  } catch (e) {
    version = `unreadable (${(e as Error).message})`;
  }
  return {
    version,
    patches: {
      'producer grouping (kafkajs-patch.ts)': kafkajsGroupingPatched,
      'per-partition send retries (send-messages.ts)': kafkajsSendPatched,
      'producer clusters, for transactions begun ahead (kafkajs-patch.ts)': kafkajsProducerPatched,
      'produce request encoder (produce-encoder.ts)': produceEncoderPatched,
      'read_committed aborted filter (aborted-filter.ts)': abortedFilterInstalled,
      'record batch decoder (fetch-decoder.ts)': fetchDecoderPatched,
      'consumer batch offset filter (fetch-decoder.ts)': batchFilterPatched,
      'static membership (kafkajs-static.ts)': staticMembershipInstalled,
      'TxnOffsetCommit v3 and OffsetFetch v7, exactly-once v2 (kafkajs-txn-v3.ts)': txnV3Installed,
      'an offset-out-of-range reset that commits nothing (kafkajs-offset-reset.ts)': offsetResetPatched,
      'request queues that poll only while a request waits (kafkajs-request-queue.ts)': requestQueuePatched,
      'fetch positions seen through batches kafkajs resolves and out-of-range resets (kafkajs-fetch-guard.ts)':
        fetchGuardPatched,
    },
    problems: [
      ...(staticMembershipProblem === undefined ? [] : [`static membership: ${staticMembershipProblem}`]),
      ...(txnV3Problem === undefined ? [] : [`TxnOffsetCommit v3: ${txnV3Problem}`]),
    ],
  };
}

/**
 * Throws `SLUICE_KAFKAJS_UNPATCHED` unless kafkajs is exactly {@link KAFKAJS_VERSION} and every
 * load-time change to it is installed: without them Sluice would run with kafkajs's quadratic
 * producer grouping, its read_committed leak, or as a dynamic member where the operator expects
 * static membership, and none of that would show until it hurts.
 */
export function assertKafkajsPatched(status: KafkajsPatchStatus = kafkajsPatchStatus()): void {
  const wrong: string[] = [];
  if (status.version !== KAFKAJS_VERSION)
    wrong.push(`kafkajs ${status.version} is installed, Sluice needs exactly ${KAFKAJS_VERSION}`);
  for (const [name, ok] of Object.entries(status.patches)) if (!ok) wrong.push(`${name} is not installed`);
  if (wrong.length === 0) return;
  const why = status.problems && status.problems.length > 0 ? ` (${status.problems.join('; ')})` : '';
  throw new SluiceError(
    'SLUICE_KAFKAJS_UNPATCHED',
    `the Kafka client cannot be trusted: ${wrong.join('; ')}${why}. Install the pinned kafkajs (npm ci), and let Sluice load first: a program that imports 'kafkajs' itself must import 'sluice' before it (the \`sluice\` command does), so that Sluice patches kafkajs before kafkajs loads.`,
  );
}
