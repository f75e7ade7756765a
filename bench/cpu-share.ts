/**
 * Where the machine's CPU goes during a bench run: samples /proc once a second for --seconds and
 * prints, per second, the cores busy in all (from /proc/stat) and the share of each role:
 * the broker (kafka.Kafka), the Sluice worker (`sluice.js run`), the latency bench's input
 * producer (rate-producer), Kafka Streams' peer (kafka-streams-peer.jar), the bench driver
 * (dist/bench/*.js) and everything else; then the mean over the seconds the worker or the peer ran.
 * Run it beside a bench, e.g.
 *
 *   node dist/bench/cpu-share.js --seconds 62 > share.md &
 *   KAFKA_BROKERS=127.0.0.1:9092 node bench/bench.mjs latency --node 24 --guarantees exactly_once \
 *     --systems sluice --loads 50 --capacity 156266 --no-write
 *
 * Linux only. CPU is utime + stime of every thread, in cores (1.0 = one core busy for the second).
 */
import { readdirSync, readFileSync } from 'node:fs';

const ROLES: Array<[string, (cmd: string) => boolean]> = [
  ['broker', (c) => c.includes('kafka.Kafka')],
  ['worker', (c) => c.includes('sluice.js run ')],
  ['rate producer', (c) => c.includes('rate-producer')],
  ['Kafka Streams', (c) => c.includes('kafka-streams-peer')],
  ['driver', (c) => /dist\/bench\/[\w-]+\.js/.test(c)],
];
const roleOf = (cmd: string) => ROLES.find(([, test]) => test(cmd))?.[0] ?? 'other';

const TICKS = 100; // USER_HZ on Linux

function processes(): Map<number, { ticks: number; role: string }> {
  const out = new Map<number, { ticks: number; role: string }>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const cmd = readFileSync(`/proc/${name}/cmdline`, 'utf8').replaceAll('\0', ' ');
      out.set(Number(name), { ticks: Number(f[11]) + Number(f[12]), role: roleOf(cmd) });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function machine(): { all: number; idle: number } {
  const v = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return { all: v.reduce((a, b) => a + b, 0), idle: v[3]! + v[4]! };
}

const at = process.argv.indexOf('--seconds');
const seconds = at >= 0 ? Number(process.argv[at + 1]) : 60;
if (!(seconds > 0)) throw new Error('--seconds takes a positive number');

const cores = readFileSync('/proc/cpuinfo', 'utf8')
  .split('\n')
  .filter((l) => l.startsWith('processor')).length;
const names = [...ROLES.map(([n]) => n), 'other'];
const rows: Array<{ t: string; busy: number; by: Map<string, number> }> = [];
let prev = processes();
let prevM = machine();
for (let i = 0; i < seconds; i++) {
  await new Promise((r) => setTimeout(r, 1000));
  const cur = processes();
  const m = machine();
  const by = new Map<string, number>();
  for (const [pid, p] of cur) {
    const before = prev.get(pid);
    if (before) by.set(p.role, (by.get(p.role) ?? 0) + (p.ticks - before.ticks) / TICKS);
  }
  const busy = (1 - (m.idle - prevM.idle) / Math.max(1, m.all - prevM.all)) * cores;
  rows.push({ t: new Date().toISOString().slice(11, 19), busy, by });
  prev = cur;
  prevM = m;
}

const f = (x: number | undefined) => (x ?? 0).toFixed(2);
console.log(`| time (UTC) | machine busy (of ${cores} cores) | ${names.join(' | ')} |`);
console.log(`|---|---:|${names.map(() => '---:').join('|')}|`);
for (const r of rows)
  console.log(`| ${r.t} | ${f(r.busy)} | ${names.map((n) => f(r.by.get(n))).join(' | ')} |`);
const running = rows.filter((r) => (r.by.get('worker') ?? 0) + (r.by.get('Kafka Streams') ?? 0) > 0.05);
if (running.length > 0) {
  const mean = (g: (r: (typeof rows)[number]) => number) =>
    running.reduce((a, r) => a + g(r), 0) / running.length;
  console.log(
    `| mean of ${running.length} s running | ${f(mean((r) => r.busy))} | ${names.map((n) => f(mean((r) => r.by.get(n) ?? 0))).join(' | ')} |`,
  );
}
