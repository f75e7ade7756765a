import { someInChain } from './error-chain.js';

/**
 * A heartbeat that does not wait for the fetch loop, as Kafka's Java consumer has one on a thread
 * of its own. kafkajs 2.2.4 heartbeats only from its runner: after each batch, and when a batch
 * handler asks. While every fetch hangs on a broker that died (a SIGKILL: the cluster fences it
 * only after its session, ~9 s, and the connections fail over after that), no batch comes and no
 * heartbeat goes; the group's new coordinator, loaded meanwhile, then removed members one session
 * after loading the group (the cluster soak: 2 of 3 members removed after a broker kill, and the
 * rebalances that follow).
 *
 * Twice per heartbeat interval this calls the group's heartbeat, which sends one only when none
 * went for an interval (kafkajs's own gate), so it adds nothing while the runner heartbeats. Its
 * errors are the runner's to act on: the coordinator answers the same to the runner's next
 * heartbeat. After a rebalance, an unknown member or a fenced one it pauses until the member
 * joins again (a member that cannot rejoin yet must not hold a rebalance up to its timeout), as
 * after a crash of kafkajs's consumer, and it never beats during a join or for a group kafkajs
 * has left. Like Java's `max.poll.interval.ms`, it stops helping a member whose batch handler
 * has run for longer than `maxHandlerMs` (with several partitions consumed at once, kafkajs's
 * other fetchers may still heartbeat for it: that is kafkajs's own behaviour).
 */
export interface BackgroundHeartbeatOptions {
  intervalMs: number;
  maxHandlerMs: number;
  /** kafkajs's ConsumerGroup of the current run (undefined before the consumer runs). */
  group: () => BeatingGroup | undefined;
  now?: () => number;
}

/** What of kafkajs's ConsumerGroup (kafkajs-static.ts's subclass) the beat reads. */
export interface BeatingGroup {
  readonly memberId: string | null;
  /** A JoinGroup/SyncGroup is under way. */
  readonly joining?: boolean;
  /** kafkajs left the group (the consumer stops or restarts after a crash). */
  readonly closed?: boolean;
  heartbeat(o: { interval: number }): Promise<void>;
}

/** Answers after which only a rejoin helps: the runner's next heartbeat meets them and rejoins. */
const REJOIN_TYPES = new Set([
  'REBALANCE_IN_PROGRESS',
  'ILLEGAL_GENERATION',
  'UNKNOWN_MEMBER_ID',
  'FENCED_INSTANCE_ID',
]);

export class BackgroundHeartbeat {
  readonly #opts: BackgroundHeartbeatOptions;
  /** When each batch handler now running started. */
  readonly #handlers = new Set<{ since: number }>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #paused = false;
  #stopped = false;

  constructor(opts: BackgroundHeartbeatOptions) {
    this.#opts = opts;
  }

  start(): void {
    if (this.#stopped || this.#timer !== undefined) return;
    this.#timer = setInterval(() => this.tick(), Math.max(10, Math.floor(this.#opts.intervalMs / 2)));
    this.#timer.unref();
  }

  /** For good: a start after it does nothing (the consumer stopped while its first join ran). */
  stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** No beat until {@link joined}: kafkajs's consumer crashed (it restarts with a new group). */
  pause(): void {
    this.#paused = true;
  }

  /** The member joined (GROUP_JOIN): beating again. */
  joined(): void {
    this.#paused = false;
  }

  /** Runs `handler` as a batch handler: while it runs longer than `maxHandlerMs`, no background beat. */
  async handling<T>(handler: () => Promise<T>): Promise<T> {
    const h = { since: this.#now() };
    this.#handlers.add(h);
    try {
      return await handler();
    } finally {
      this.#handlers.delete(h);
    }
  }

  /** One beat, when the member is in a group and no handler is stuck. Returns whether it asked. */
  tick(): boolean {
    const group = this.#opts.group();
    if (this.#paused || !group?.memberId || group.joining || group.closed) return false;
    const now = this.#now();
    for (const h of this.#handlers) if (now - h.since > this.#opts.maxHandlerMs) return false;
    group.heartbeat({ interval: this.#opts.intervalMs }).catch((e: unknown) => {
      if (someInChain(e, (x) => typeof x.type === 'string' && REJOIN_TYPES.has(x.type))) this.#paused = true;
    });
    return true;
  }

  #now(): number {
    return (this.#opts.now ?? Date.now)();
  }
}
