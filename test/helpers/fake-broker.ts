import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const Broker = require('kafkajs/src/broker/index.js');
const { lookup } = require('kafkajs/src/protocol/requests/index.js');
export const apiKeys: Record<string, number> = require('kafkajs/src/protocol/requests/apiKeys.js');
const SEND = Object.getOwnPropertySymbols(Broker.prototype).find(
  (s) => s.description === 'private:Broker:sendRequest',
)!;

/**
 * A kafkajs Broker (with Sluice's patches on its prototype) without a connection, for unit tests
 * of the patched requests: it offers `maxVersions` (by API name, from v0), records the requests it
 * would send, encoded, and answers each with `answer(request, response)`.
 */
export function fakeBroker(
  maxVersions: Record<string, number>,
  answer: (request: any, response: any) => unknown = () => ({}),
) {
  const versions: Record<number, { minVersion: number; maxVersion: number }> = {};
  for (const [name, max] of Object.entries(maxVersions))
    versions[apiKeys[name]!] = { minVersion: 0, maxVersion: max };
  const sent: Array<{ apiName: string; apiVersion: number; bytes: Buffer }> = [];
  const b = Object.create(Broker.prototype);
  b.versions = versions;
  b.brokerAddress = 'fake:9092';
  b.lookupRequest = lookup(versions);
  b[SEND] = async ({ request, response }: any) => {
    sent.push({
      apiName: request.apiName,
      apiVersion: request.apiVersion,
      bytes: (await request.encode()).buffer,
    });
    return answer(request, response);
  };
  return { b, sent };
}
