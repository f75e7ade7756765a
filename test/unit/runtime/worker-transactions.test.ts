import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import type { KafkaAdmin } from '../../../src/kafka/admin.js';
import {
  isGenerationFenced,
  type TopicRecords,
  type TransactionalProducer,
  type WrittenOffsets,
} from '../../../src/kafka/producer.js';
import { pinnedTxnGroupMetadata, txnGroupMetadataFor } from '../../../src/kafka/txn-group-metadata.js';
import type { GroupMetadata, OutRecord, TopicPartitionOffset } from '../../../src/kafka/types.js';
import { createLogger } from '../../../src/ops/logger.js';
import { checkpointBeforeRejoin } from '../../../src/runtime/rejoin.js';
import { WorkerTransactions } from '../../../src/runtime/worker-transactions.js';

/**
 * The worker's one transaction at a time under exactly-once v2 (pure unit: a fake producer that
 * records each commit and settles it when the test says). The broker side (fencing by
 * generation, stable offsets) is proved in test/integration/txn-offset-commit-v3.test.ts and the
 * zombie and crash tests.
 */
interface Commit {
  records: TopicRecords;
  offsets: readonly TopicPartitionOffset[];
  meta: GroupMetadata | undefined;
  settle: (e?: Error) => void;
}

class FakeProducer {
  readonly n: number;
  commits: Commit[] = [];
  closed = false;
  #pending: Array<(e: Error) => void> = [];
  constructor(n: number) {
    this.n = n;
  }
  begin(): void {}
  /** Each producer made again is the next epoch of one producer id, as InitProducerId bumps it. */
  identity() {
    return { producerId: '77', epoch: this.n };
  }
  /** Transactions begun ahead given up (`shut`). */
  dropped = 0;
  dropAhead(): void {
    this.dropped++;
  }
  commitTransaction(
    records: TopicRecords,
    offsets: { groupId: string; offsets: readonly TopicPartitionOffset[] },
  ): Promise<WrittenOffsets> {
    if (this.closed) return Promise.reject(new Error('closed'));
    return new Promise((resolve, reject) => {
      this.#pending.push(reject);
      this.commits.push({
        records,
        offsets: offsets.offsets,
        meta: pinnedTxnGroupMetadata('app-w1'),
        settle: (e) => (e ? reject(e) : resolve(new Map([['out:0', BigInt(this.n)]]))),
      });
    });
  }
  async close(): Promise<void> {
    this.closed = true;
    for (const r of this.#pending) r(new Error('producer closed while its transaction was in flight'));
  }
}

function setup(
  meta: GroupMetadata | null = { generationId: 3, memberId: 'm-1', groupInstanceId: 'w1' },
  /** Awaited by each producer's making (its InitProducerId). */
  making: () => Promise<unknown> = async () => undefined,
) {
  const made: FakeProducer[] = [];
  const stable: string[] = [];
  const current = { meta };
  const w = new WorkerTransactions({
    transactionalId: 'app-w1',
    groupId: 'app',
    make: async () => {
      await making();
      const p = new FakeProducer(made.length);
      made.push(p);
      return p as unknown as TransactionalProducer;
    },
    groupMetadata: () => current.meta ?? undefined,
    admin: async () =>
      ({
        committedOffsetsStable: async (
          _g: string,
          inputs: Array<{ topic: string; partitions: number[] }>,
        ) => {
          for (const i of inputs) stable.push(`${i.topic}:${i.partitions.join(',')}`);
          return [];
        },
      }) as unknown as KafkaAdmin,
    logger: createLogger({ level: 'silent', format: 'json' }),
  });
  return { w, made, stable, current };
}

const rec = (v: string): OutRecord => ({ key: Buffer.from(v), value: Buffer.from(v) });
const recs = (topic: string, ...v: string[]): TopicRecords => new Map([[topic, v.map(rec)]]);
const off = (topic: string, partition: number, offset: number): TopicPartitionOffset[] => [
  { topic, partition, offset: String(offset), metadata: null },
];
const group = (offsets: readonly TopicPartitionOffset[]) => ({ groupId: 'app', offsets });
const values = (r: TopicRecords, topic: string) => (r.get(topic) ?? []).map((m) => String(m.value));
/** Two turns of the event loop: a queued checkpoint reaches the producer. */
const turn = async () => {
  await tick();
  await tick();
};
/** The gate open, and two tasks joined. */
async function twoTasks(...args: Parameters<typeof setup>) {
  const s = setup(...args);
  s.w.open();
  const a = await s.w.join('0_0', [], 1000);
  const b = await s.w.join('0_1', [], 1000);
  return { ...s, a, b };
}
/** What `p` rejected with (undefined if it resolved). */
const errorOf = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: Error) => e,
  );

test('the checkpoints of a turn go in one transaction, with the generation they were made in', async () => {
  const { w, made, stable } = setup();
  w.open();
  const a = await w.join('0_0', [{ topic: 'in', partitions: [0] }], 1000);
  const b = await w.join('0_1', [{ topic: 'in', partitions: [1] }], 1000);
  assert.deepEqual(stable, ['in:0', 'in:1'], 'each task waits for stable offsets before it starts');
  const pa = a.commitTransaction(recs('out', 'a1', 'a2'), group(off('in', 0, 10)));
  const pb = b.commitTransaction(recs('out', 'b1'), group(off('in', 1, 7)));
  await turn();
  assert.equal(made.length, 1);
  assert.equal(made[0]!.commits.length, 1, 'one transaction for both tasks');
  const c = made[0]!.commits[0]!;
  assert.deepEqual(values(c.records, 'out'), ['a1', 'a2', 'b1']);
  assert.deepEqual(
    c.offsets.map((o) => `${o.partition}@${o.offset}`),
    ['0@10', '1@7'],
  );
  assert.deepEqual(c.meta, { generationId: 3, memberId: 'm-1', groupInstanceId: 'w1' });
  c.settle();
  assert.deepEqual(await pa, new Map([['out:0', 0n]]));
  assert.deepEqual(await pb, new Map([['out:0', 0n]]));
  await w.close();
});

test('a checkpoint while one is in flight goes in the next transaction, after it', async () => {
  const { w, made, a, b } = await twoTasks();
  const pa = a.commitTransaction(recs('out', 'a1'), group(off('in', 0, 1)));
  await turn();
  const pb = b.commitTransaction(recs('out', 'b1'), group(off('in', 1, 1)));
  await turn();
  assert.equal(made[0]!.commits.length, 1, 'one transaction at a time');
  made[0]!.commits[0]!.settle();
  await pa;
  await turn();
  assert.equal(made[0]!.commits.length, 2);
  assert.deepEqual(values(made[0]!.commits[1]!.records, 'out'), ['b1']);
  made[0]!.commits[1]!.settle();
  await pb;
  await w.close();
});

test('while shut (the member is rejoining), no transaction begins; open lets the queue go', async () => {
  const { w, made } = setup();
  const a = await w.join('0_0', [], 1000);
  const p = a.commitTransaction(recs('out', 'a1'), group(off('in', 0, 1)));
  await turn();
  assert.equal(made[0]!.commits.length, 0, 'the gate starts shut: no assignment yet');
  w.open();
  w.shut();
  await turn();
  assert.equal(made[0]!.commits.length, 0);
  assert.equal(
    made[0]!.dropped,
    1,
    'a transaction begun ahead is given up: a rejoin can outlast its timeout',
  );
  w.open();
  await turn();
  assert.equal(made[0]!.commits.length, 1);
  made[0]!.commits[0]!.settle();
  await p;
  await w.close();
});

test('a rejoin whose JoinGroup failed reopens the gate, under the generation it was opened for', async () => {
  const { w, made, current } = setup();
  const a = await w.join('0_0', [], 1000);
  w.reopen();
  assert.equal(w.isOpen, false, 'never opened: no assignment to reopen for');
  w.open(); // generation 3
  w.shut(); // beforeRejoin
  // A JoinGroup got through (kafkajs's live generation is 4), then the retried one failed: the
  // member never saw generation 4's assignment.
  current.meta = { generationId: 4, memberId: 'm-1', groupInstanceId: 'w1' };
  const p = a.commitTransaction(recs('out', 'a1'), group(off('in', 0, 1)));
  await turn();
  assert.equal(made[0]!.commits.length, 0, 'shut: the checkpoint waits');
  w.reopen();
  await turn();
  assert.equal(made[0]!.commits.length, 1, 'it goes once the gate reopens');
  assert.equal(made[0]!.commits[0]!.meta?.generationId, 3, 'under the generation of the tasks it holds');
  made[0]!.commits[0]!.settle();
  await p;
  await w.close();
  w.shut();
  w.reopen();
  assert.equal(w.isOpen, false, 'a closed one stays shut');
});

test('a failed transaction fails every task in it, and the next one gets a new producer', async () => {
  const { w, made, a, b } = await twoTasks();
  const pa = a.commitTransaction(recs('out', 'a1'), group(off('in', 0, 1)));
  const pb = b.commitTransaction(recs('out', 'b1'), group(off('in', 1, 1)));
  await turn();
  const fenced = Object.assign(new Error('The generation is stale'), {
    type: 'ILLEGAL_GENERATION',
    code: 22,
  });
  made[0]!.commits[0]!.settle(fenced);
  const ea = await errorOf(pa);
  const eb = await errorOf(pb);
  assert.match(String(ea?.message), /generation is stale/);
  assert.match(String(eb?.message), /generation is stale/);
  // One error per task: the task manager handles a checkpoint failure once per error object, so
  // a shared one would reset only the first task of the transaction.
  assert.notEqual(ea, eb);
  assert.equal(ea?.cause, fenced);
  assert.ok(isGenerationFenced(ea) && isGenerationFenced(eb), 'each is seen as fenced (TaskMigratedError)');
  await tick();
  assert.equal(made[0]!.closed, true, 'the failed transaction’s producer is thrown away');
  assert.equal(made.length, 2, 'and one is made again at once (its InitProducerId aborts what is left open)');
  const pa2 = a.commitTransaction(recs('out', 'a2'), group(off('in', 0, 2)));
  await turn();
  assert.equal(made[1]!.commits.length, 1);
  // kafkajs may still retry the thrown-away producer's TxnOffsetCommit: it is refused from now on,
  // not sent with this transaction's generation.
  assert.equal(txnGroupMetadataFor('app-w1', '77', 0).kind, 'stale');
  assert.equal(txnGroupMetadataFor('app-w1', '77', 1).kind, 'pinned');
  made[1]!.commits[0]!.settle();
  await pa2;
  await w.close();
  assert.equal(
    txnGroupMetadataFor('app-w1', '77', 1).kind,
    'stale',
    'and nothing of a closed one goes unfenced',
  );
});

test('a task that closes with its records in the transaction in flight fails that transaction for all', async () => {
  const { w, made, a, b } = await twoTasks();
  const pa = a.commitTransaction(recs('out', 'a1'), group(off('in', 0, 1)));
  const pb = b.commitTransaction(recs('out', 'b1'), group(off('in', 1, 1)));
  await turn();
  await a.close(); // its state goes back to its last checkpoint: the transaction must not commit
  await assert.rejects(pa, /closed/);
  await assert.rejects(pb, /closed/);
  assert.equal(made[0]!.closed, true);
  await w.close();
});

test('a task that closes with its checkpoint still queued takes only its own out', async () => {
  const { w, made, a, b } = await twoTasks();
  const first = b.commitTransaction(recs('out', 'b0'), group(off('in', 1, 1)));
  await turn();
  const pa = a.commitTransaction(recs('out', 'a1'), group(off('in', 0, 1)));
  const pb = b.commitTransaction(recs('out', 'b1'), group(off('in', 1, 2)));
  await a.close();
  await assert.rejects(pa, /closed before its checkpoint began/);
  made[0]!.commits[0]!.settle();
  await first;
  await turn();
  assert.equal(made[0]!.commits.length, 2);
  assert.deepEqual(values(made[0]!.commits[1]!.records, 'out'), ['b1']);
  made[0]!.commits[1]!.settle();
  await pb;
  assert.equal(made[0]!.closed, false);
  await w.close();
});

test('without group metadata (not a member) no transaction commits', async () => {
  const { w } = setup(null);
  w.open();
  const a = await w.join('0_0', [], 1000);
  await assert.rejects(
    a.commitTransaction(recs('out', 'a1'), group(off('in', 0, 1))),
    /not a member of its group/,
  );
  await w.close();
});

test("the generation is the one the gate was opened in, not kafkajs's live one", async () => {
  const { w, made, current } = setup();
  w.open();
  const a = await w.join('0_0', [], 1000);
  // A rejoin's JoinGroup moved kafkajs's fields before this member knew its new assignment.
  current.meta = { generationId: 4, memberId: 'm-1', groupInstanceId: 'w1' };
  const p = a.commitTransaction(recs('out', 'a1'), group(off('in', 0, 1)));
  await turn();
  assert.equal(made[0]!.commits[0]!.meta?.generationId, 3);
  made[0]!.commits[0]!.settle();
  await p;
  await w.close();
});

test('a checkpoint queued while the producer is made again is withdrawn when its task is revoked', async () => {
  let release!: () => void;
  let slow = false;
  const { w, made } = setup(undefined, () =>
    slow ? new Promise<void>((r) => (release = r)) : Promise.resolve(),
  );
  w.open();
  const a = await w.join('0_0', [], 1000);
  const b = await w.join('0_1', [], 1000);
  const first = a.commitTransaction(recs('out', 'a0'), group(off('in', 0, 1)));
  await turn();
  slow = true; // the next producer's InitProducerId hangs (a broker restarting)
  made[0]!.commits[0]!.settle(new Error('broker gone'));
  await assert.rejects(first, /broker gone/);
  const pa = a.commitTransaction(recs('out', 'a1'), group(off('in', 0, 2)));
  const pb = b.commitTransaction(recs('out', 'b1'), group(off('in', 1, 2)));
  await turn();
  w.shut(); // the member rejoins; task 0_0 is revoked, 0_1 kept
  w.open(['0_0']);
  await assert.rejects(pa, /revoked before its checkpoint began/);
  release();
  await turn();
  await tick();
  assert.equal(made.length, 2);
  assert.equal(made[1]!.commits.length, 1);
  assert.deepEqual(values(made[1]!.commits[0]!.records, 'out'), ['b1'], 'only the kept task’s records');
  made[1]!.commits[0]!.settle();
  await pb;
  await w.close();
});

test('stopping mid-rejoin fails the queued checkpoints instead of waiting for the gate', async () => {
  const { w, made } = setup();
  const a = await w.join('0_0', [], 1000);
  const p = a.commitTransaction(recs('out', 'a1'), group(off('in', 0, 1)));
  w.dropQueued();
  await assert.rejects(p, /nothing more commits/);
  assert.equal(made[0]!.commits.length, 0);
  await w.close();
});

test("a revoked task's checkpoint asked for after the new assignment opened the gate fails: nothing of it commits under the new generation", async () => {
  const { w, made, current, a, b } = await twoTasks();
  w.shut(); // beforeRejoin (kafkajs rejoins from inside a fetch: 0_0's handler still runs)
  current.meta = { generationId: 4, memberId: 'm-1', groupInstanceId: 'w1' };
  w.open(['0_0']); // generation 4: 0_0 went to another member
  // 0_0's handler ends its batch and asks for the checkpoint that was due.
  const late = errorOf(a.commitTransaction(recs('out', 'a-late'), group(off('in', 0, 150))));
  const kept = b.commitTransaction(recs('out', 'b1'), group(off('in', 1, 5)));
  await turn();
  const e = await late;
  assert.equal(e?.name, 'TaskMigratedError');
  assert.match(String(e?.message), /task 0_0 migrated/);
  assert.equal(made[0]!.commits.length, 1);
  const c = made[0]!.commits[0]!;
  assert.deepEqual(values(c.records, 'out'), ['b1'], 'only the kept task commits');
  assert.deepEqual(
    c.offsets.map((o) => `${o.partition}@${o.offset}`),
    ['1@5'],
  );
  assert.equal(c.meta?.generationId, 4);
  c.settle();
  await kept;
  // The same task id assigned here again later is a new member, which commits.
  const again = await w.join('0_0', [], 1000);
  const p = again.commitTransaction(recs('out', 'a2'), group(off('in', 0, 200)));
  await turn();
  assert.deepEqual(values(made[0]!.commits[1]!.records, 'out'), ['a2']);
  made[0]!.commits[1]!.settle();
  await p;
  await w.close();
});

test('before a rejoin, a checkpoint queued while the last transaction ran does not begin as that one ends: the gate is shut first', async () => {
  const { w, made, a, b } = await twoTasks();
  const first = a.commitTransaction(recs('out', 'a1'), group(off('in', 0, 1)));
  await turn();
  // Another fetcher's handler asks for a checkpoint while the transaction is in flight.
  const queued = b.commitTransaction(recs('out', 'b1'), group(off('in', 1, 1)));
  const rejoin = checkpointBeforeRejoin([], async () => undefined, w);
  await turn();
  made[0]!.commits[0]!.settle();
  await first;
  await rejoin;
  await turn();
  assert.equal(w.isOpen, false);
  assert.equal(made[0]!.commits.length, 1, 'nothing begins while the member rejoins');
  w.open(); // the new assignment kept 0_1: its checkpoint commits under the new generation
  await turn();
  assert.deepEqual(values(made[0]!.commits[1]!.records, 'out'), ['b1']);
  made[0]!.commits[1]!.settle();
  await queued;
  await w.close();
});
