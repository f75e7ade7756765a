import { createHash } from 'node:crypto';

/** A short stable hash of a JSON-shaped value (its JSON text): the topology record's, a layout's. */
export function jsonHash(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 16);
}
