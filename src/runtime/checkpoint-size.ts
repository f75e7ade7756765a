import type { OutRecord } from '../kafka/types.js';

/**
 * Records and key + value bytes of what one checkpoint writes (outputs, dead letters, changelog
 * records), for `sluice_checkpoint_records` and `sluice_checkpoint_bytes`. Headers are left out:
 * they are small, and counting them would mean walking every header of every record.
 */
export function checkpointSize(lists: Iterable<readonly OutRecord[]>): { records: number; bytes: number } {
  let records = 0;
  let bytes = 0;
  for (const l of lists) {
    for (let i = 0; i < l.length; i++) {
      const r = l[i]!;
      if (r.batch !== undefined) {
        records += r.batch.count;
        bytes += r.batch.keyValueBytes;
        continue;
      }
      records++;
      if (r.key) bytes += r.key.length;
      if (r.value) bytes += r.value.length;
    }
  }
  return { records, bytes };
}
