import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AssignerProtocol } from 'kafkajs';
import { assignTasks, createTaskAssigner, memberInfoOf } from '../../../src/kafka/task-assigner.js';

const metadata = (userData: string | undefined) =>
  AssignerProtocol.MemberMetadata.encode({
    version: 1,
    topics: ['in'],
    userData: userData === undefined ? Buffer.alloc(0) : Buffer.from(userData),
  });

test("a member's metadata of another shape should count as no tasks to keep, not fail the leader's assignment", () => {
  assert.deepEqual(memberInfoOf(metadata('{"tasks":["0_1"],"http":"h:1"}')), { tasks: ['0_1'], http: 'h:1' });
  for (const odd of [undefined, '{}', 'null', '[]', '7', '{"tasks":"0_1"}', 'not json'])
    assert.deepEqual(memberInfoOf(metadata(odd)), { tasks: [] }, String(odd));
  assert.deepEqual(memberInfoOf(metadata('{"tasks":["0_1",3,null]}')), { tasks: ['0_1'] });
  assert.deepEqual(memberInfoOf(Buffer.from([1, 2, 3])), { tasks: [] }, 'undecodable');
  // Such a member takes part in the plan like a new one: every task goes to exactly one member.
  const plan = assignTasks(
    [
      { memberId: 'a', info: memberInfoOf(metadata('{"tasks":["0_0","0_1"]}')) },
      { memberId: 'b', info: memberInfoOf(metadata('null')) },
    ],
    ['0_0', '0_1', '0_2', '0_3'],
  );
  const all = [...plan.values()].flat().sort();
  assert.deepEqual(all, ['0_0', '0_1', '0_2', '0_3']);
  assert.equal(plan.get('b')!.length, 2);
});

test('the leader should assign tasks only to members of its own topology layout', async () => {
  // v2 reads 'in' and 'side' co-partitioned in sub-topology 0; v1 read them in two (0 and 1): a
  // v1 member turns partition 0 of 'side' into task 1_0, a v2 member into 0_0, so mixing them
  // could run one task on two members at once.
  const v2 = { subtopologyOf: (t: string) => ({ in: 0, side: 0 })[t], fingerprint: 'v2-layout' };
  const others: unknown[] = [];
  const assigner = createTaskAssigner(
    v2,
    () => ({ tasks: [] }),
    undefined,
    (o) => others.push(...o),
  )({
    cluster: { findTopicPartitionMetadata: () => [0, 1].map((partitionId) => ({ partitionId })) },
  } as never);
  const member = (memberId: string, info: object | undefined) => ({
    memberId,
    memberMetadata: metadata(info === undefined ? undefined : JSON.stringify(info)),
  });
  const plan = await assigner.assign({
    members: [
      member('a', { tasks: ['0_0'], layout: 'v2-layout' }),
      member('b', { tasks: ['0_1', '1_1'], layout: 'v1-layout' }),
      member('c', { tasks: [] }), // a Sluice that sends no layout
      member('d', { tasks: [], layout: 'v2-layout' }),
    ],
    topics: ['in', 'side'],
  });
  const decoded = new Map(
    plan.map((p) => [p.memberId, AssignerProtocol.MemberAssignment.decode(p.memberAssignment)!.assignment]),
  );
  assert.deepEqual([...decoded.keys()].sort(), ['a', 'b', 'c', 'd'], 'every member gets an answer');
  assert.deepEqual(decoded.get('b'), {});
  assert.deepEqual(decoded.get('c'), {});
  const owned = [...decoded.get('a')!.in!, ...decoded.get('d')!.in!].sort();
  assert.deepEqual(owned, [0, 1], 'both tasks, each to one member of the layout');
  for (const id of ['a', 'd']) assert.deepEqual(decoded.get(id)!.in, decoded.get(id)!.side, 'co-partitioned');
  assert.deepEqual(others, [
    { memberId: 'b', layout: 'v1-layout' },
    { memberId: 'c', layout: undefined },
  ]);
  // A member says its layout when it joins.
  const md = AssignerProtocol.MemberMetadata.decode(assigner.protocol({ topics: ['in'] }).metadata)!;
  assert.equal(JSON.parse(md.userData.toString()).layout, 'v2-layout');
});
