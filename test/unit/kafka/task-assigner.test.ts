import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AssignerProtocol } from 'kafkajs';
import { assignTasks, memberInfoOf } from '../../../src/kafka/task-assigner.js';

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
