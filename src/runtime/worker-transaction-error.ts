/**
 * A task's checkpoint failed with its worker's transaction: one error per task, its cause the
 * transaction's. The task manager handles each checkpoint failure once, by its error object; one
 * object shared by every task of the transaction reset only the first, and the others went on
 * from state whose outputs had not committed (found by the broker-outage test).
 */
export class WorkerTransactionError extends Error {
  constructor(taskId: string, cause: unknown) {
    super(`task ${taskId}: its worker's transaction failed: ${(cause as Error)?.message ?? String(cause)}`, {
      cause,
    });
    this.name = (cause as Error)?.name ?? 'WorkerTransactionError';
  }
}
