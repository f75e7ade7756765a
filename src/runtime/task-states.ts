import { SluiceError } from '../errors.js';

export const TASK_STATES = ['created', 'restoring', 'running', 'closed'] as const;
export type TaskStateName = (typeof TASK_STATES)[number];
const TRANSITIONS: Record<TaskStateName, readonly TaskStateName[]> = {
  created: ['restoring', 'closed'],
  restoring: ['running', 'restoring', 'closed'],
  running: ['restoring', 'closed'],
  closed: [],
};

/** The state after moving from `from` to `to`; an illegal move is Sluice's bug, reported as such. */
export function transition(taskId: string, from: TaskStateName, to: TaskStateName): TaskStateName {
  if (!TRANSITIONS[from].includes(to))
    throw new SluiceError('SLUICE_TASK_CORRUPTED', `task ${taskId}: illegal transition ${from} → ${to}`);
  return to;
}
