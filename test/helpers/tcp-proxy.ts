import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 that a test controls: `cut()` destroys every connection and refuses new
 * ones (the client sees resets, then ECONNREFUSED), `heal()` accepts again, `latencyMs` delays
 * every chunk in both directions (order kept). One per broker: a worker bootstrapped at the
 * proxies reaches the brokers only through them when each broker advertises its proxy's port on
 * the listener behind it (see `startLocalKafka({ listeners })`).
 */
export class TcpProxy {
  readonly listenPort: number;
  readonly targetPort: number;
  latencyMs = 0;
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  /** Connections accepted so far (a check that the worker does go through the proxy). */
  accepted = 0;
  /** Chunks forwarded late because of `latencyMs`. */
  delayed = 0;

  constructor(listenPort: number, targetPort: number) {
    this.listenPort = listenPort;
    this.targetPort = targetPort;
  }

  get isCut(): boolean {
    return this.#server === undefined;
  }

  /** Starts accepting (again). */
  async heal(): Promise<void> {
    if (this.#server) return;
    const server = createServer((client) => this.#pipe(client));
    await new Promise<void>((done, fail) => {
      server.once('error', fail);
      server.listen({ port: this.listenPort, host: '127.0.0.1' }, done);
    });
    this.#server = server;
  }

  /** Refuses new connections and resets the open ones. */
  async cut(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
    if (server) await new Promise((done) => server.close(done));
  }

  #pipe(client: Socket): void {
    this.accepted++;
    const upstream = connect({ port: this.targetPort, host: '127.0.0.1' });
    this.#sockets.add(client);
    this.#sockets.add(upstream);
    const forward = (from: Socket, to: Socket) => {
      // Each chunk is due `latencyMs` after it came, never before the one ahead of it: timers
      // fire in order of their due times (equal ones in the order set), so the stream stays in order.
      let lastDue = 0;
      from.on('data', (chunk: Buffer) => {
        const now = Date.now();
        const due = Math.max(now + this.latencyMs, lastDue);
        lastDue = due;
        if (due <= now) to.write(chunk);
        else {
          this.delayed++;
          setTimeout(() => to.destroyed || to.write(chunk), due - now);
        }
      });
    };
    forward(client, upstream);
    forward(upstream, client);
    const close = () => {
      client.destroy();
      upstream.destroy();
      this.#sockets.delete(client);
      this.#sockets.delete(upstream);
    };
    for (const s of [client, upstream]) {
      s.on('error', close);
      s.on('close', close);
    }
  }
}
