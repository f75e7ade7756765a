import { createServer } from 'node:net';

/** Whether `port` can be listened on at 127.0.0.1 right now. */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** A port the OS reports free at 127.0.0.1 (free when asked; a race with other processes remains). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}

/**
 * A free port whose next one is free too: the local Kafka launcher puts the controller on
 * `port + 1` unless told otherwise (as `sluice dev --kafka-port` and `sluice kafka start` do).
 */
export async function freePortPair(): Promise<number> {
  for (;;) {
    const p = await freePort();
    if (p < 65535 && (await portIsFree(p + 1))) return p;
  }
}
