import type { Producer } from 'kafkajs';
import { testKafka } from './kafka.js';

/**
 * A producer at a controlled rate: every `tickMs` it sends as many records as the rate says should
 * exist by now (so a slow send is caught up, not lost), spread round-robin over the partitions.
 * Values are JSON `{ seq, prio }` with a global sequence number; the Kafka timestamp is the send
 * time, so the worker's end-to-end latency is measured from it.
 */
export class PacedProducer {
  readonly topic: string;
  readonly partitions: number;
  #producer: Producer | undefined;
  #rate = 0;
  #seq = 0;
  #running: Promise<void> | undefined;
  #stop = false;
  #owed = 0;
  #last = 0;
  readonly tickMs: number;

  constructor(topic: string, partitions: number, opts: { tickMs?: number } = {}) {
    this.topic = topic;
    this.partitions = partitions;
    this.tickMs = opts.tickMs ?? 20;
  }

  /** Records sent so far. */
  get sent(): number {
    return this.#seq;
  }

  /** Records per second from now on (0 pauses). */
  setRate(rate: number): void {
    this.#rate = rate;
  }

  async start(rate: number): Promise<void> {
    this.#rate = rate;
    this.#producer = testKafka().producer({ idempotent: true, maxInFlightRequests: 1 });
    await this.#producer.connect();
    this.#last = performance.now();
    this.#running = this.#loop();
  }

  async #loop(): Promise<void> {
    while (!this.#stop) {
      const now = performance.now();
      this.#owed += (this.#rate * (now - this.#last)) / 1000;
      this.#last = now;
      const n = Math.floor(this.#owed);
      if (n > 0) {
        this.#owed -= n;
        const ts = String(Date.now());
        const messages = Array.from({ length: n }, () => {
          const seq = this.#seq++;
          return {
            key: `k${seq}`,
            value: JSON.stringify({ seq, prio: seq % 4 }),
            partition: seq % this.partitions,
            timestamp: ts,
          };
        });
        await this.#producer!.send({ topic: this.topic, acks: -1, messages });
      }
      const wait = this.tickMs - (performance.now() - now);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
  }

  /** Stops sending; resolves once the last send is acknowledged. Returns the total sent. */
  async stop(): Promise<number> {
    this.#stop = true;
    await this.#running;
    await this.#producer?.disconnect();
    return this.#seq;
  }
}
