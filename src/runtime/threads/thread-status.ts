/**
 * The /status document of a process with several stream threads, from each thread's own
 * (src/ops/status.ts): one app, its tasks and operator counts over all threads, ready only when
 * every thread is, and a `threads` list saying which thread is which group member. Thread 0's
 * document is the base: its group view, partitions and sections (overload, ...).
 */
type Doc = Record<string, unknown>;

interface TaskDoc {
  id: string;
  subtopology: number;
  partition: number;
}
interface OperatorDoc {
  id: number;
  records: number;
}
interface WorkerDoc {
  memberId: string | null;
}

/** The /status of a thread that has none to give yet (`starting`) or did not answer (`failed`). */
export function placeholderStatus(state: 'starting' | 'failed', reason: string): Doc {
  return { state, readiness: { ready: false, reason }, worker: { memberId: null }, tasks: [] };
}

export function mergeThreadStatus(docs: readonly Doc[]): Doc {
  const base = docs[0];
  if (!base) throw new Error('no thread status to merge');
  if (docs.length === 1) return base;
  const tasks = docs
    .flatMap((d) => (d.tasks as TaskDoc[] | undefined) ?? [])
    .sort((a, b) => a.partition - b.partition || a.subtopology - b.subtopology);
  const records = new Map<number, number>();
  for (const d of docs)
    for (const op of (d.operators as OperatorDoc[] | undefined) ?? [])
      records.set(op.id, (records.get(op.id) ?? 0) + op.records);
  const operators = ((base.operators as OperatorDoc[] | undefined) ?? []).map((op) => ({
    ...op,
    records: records.get(op.id) ?? op.records,
  }));
  const notRunning = docs.find((d) => d.state !== 'running');
  const notReady = docs.findIndex((d) => !(d.readiness as { ready?: boolean } | undefined)?.ready);
  const readiness =
    notReady < 0
      ? { ready: true }
      : {
          ready: false,
          reason: `thread ${notReady}: ${(docs[notReady]!.readiness as { reason?: string } | undefined)?.reason ?? 'starting'}`,
        };
  const ours = new Set(docs.map((d) => (d.worker as WorkerDoc | undefined)?.memberId).filter(Boolean));
  const group = base.group as { members?: Array<{ memberId: string }> } | undefined;
  return {
    ...base,
    state: notRunning?.state ?? base.state,
    readiness,
    group: group && {
      ...group,
      members: (group.members ?? []).map((m) => ({ ...m, self: ours.has(m.memberId) })),
    },
    tasks,
    operators,
    threads: docs.map((d, thread) => ({
      thread,
      state: d.state,
      worker: d.worker,
      readiness: d.readiness,
      tasks: ((d.tasks as TaskDoc[] | undefined) ?? []).map((t) => t.id),
    })),
  };
}
