import { App, json, string } from '../../src/index.js';

/**
 * A small stateful topology for unit tests of tasks and state: orders left-joined to a users
 * table (one sub-topology, two inputs, one store). Returns its only sub-topology.
 */
export function ordersJoinUsers(id: string) {
  const app = new App({ id });
  const users = app.table('users', { key: string(), value: json<{ name: string }>() });
  app
    .stream('orders', { key: string(), value: json<{ n: number }>() })
    .byKey()
    .leftJoin(users, (o, u) => ({ ...o, name: u?.name ?? null }), { name: 'j' })
    .to('out');
  return app.topology().subtopologies[0]!;
}
