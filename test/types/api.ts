/**
 * Type tests of the DSL: compiled (never run) by `npm run build` and `npm run lint`
 * (`tsc -p test/types`, strict). Each `@ts-expect-error` line must fail to compile (tsc reports
 * an unused one), and the lines without one must compile, so the types say what the runtime does.
 */
import {
  App,
  avro,
  bytes,
  json,
  jsonSchema,
  type KeyedStream,
  number,
  protobuf,
  type Stream,
  string,
  valueState,
} from 'sluice';

interface Reading {
  sensor: string;
  bucket: number;
  temp: number;
  ts: number;
}
interface Alert {
  sensor: string;
  prev: number;
  now: number;
}

/** Compiles only when A and B are the same type. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function expectType<T extends true>(_: T): void {}

const app = new App({ id: 'types' });
const readings = app.stream('readings', { value: json<Reading>() });

// A stream without serdes is string keys and Buffer values, and writes those bytes as they are.
const raw = app.stream('in');
expectType<Equal<typeof raw, Stream<string, Buffer>>>(true);
raw.to('out');

// Type arguments other than the defaults need the serdes that make them true.
const explicit = app.stream<string, Reading>('explicit', { value: json<Reading>() });
expectType<Equal<typeof explicit, Stream<string, Reading>>>(true);
app.stream<number, Buffer>('numbered', { key: number() });
app.stream<string, Buffer>('bytes-explicit');
// @ts-expect-error a Reading type with no serde would be Buffers at runtime
app.stream<string, Reading>('lie');
// @ts-expect-error number keys need their serde
app.stream<number, Buffer>('lie-2');
// @ts-expect-error a key serde does not make the values Readings
app.stream<string, Reading>('lie-3', { key: string() });
// @ts-expect-error the same for keyedStream
app.keyedStream<string, Reading>('lie-4');
const inferred = app.stream('inferred', { key: number(), value: json<Reading>() });
expectType<Equal<typeof inferred, Stream<number, Reading>>>(true);

// keyBy to a string needs no serde; to anything else it does, and keeps the key's type.
const bySensor = readings.keyBy((r) => r.sensor);
expectType<Equal<typeof bySensor, KeyedStream<string, Reading>>>(true);
const byBucket = readings.keyBy((r) => r.bucket, { key: number() });
expectType<Equal<typeof byBucket, KeyedStream<number, Reading>>>(true);
byBucket.map((_r, ctx) => ctx.key + 1).to('next-bucket');
// @ts-expect-error a number key without a key serde would be the string "7" downstream
readings.keyBy((r) => r.bucket);
// @ts-expect-error an object key without a key serde
readings.keyBy((r) => ({ s: r.sensor }));
readings.keyBy((r) => ({ s: r.sensor }), { key: json<{ s: string }>() });
// @ts-expect-error the key serde must be for the key's type
readings.keyBy((r) => r.bucket, { key: string() });

// The timestamp extractor sees the value's type.
app.stream('clicks', { value: json<Reading>(), timestamp: (r) => r.ts });
app.stream('clicks-2', { value: json<Reading>(), timestamp: 'processing' });
// @ts-expect-error a misspelled field of the value
app.stream('clicks-3', { value: json<Reading>(), timestamp: (r) => r.tsx });
// @ts-expect-error a Buffer value has no ts
app.stream('clicks-4', { timestamp: (r) => r.ts });
// @ts-expect-error the extractor returns a number
app.stream('clicks-5', { value: json<Reading>(), timestamp: (r) => r.sensor });

// Keyed state: inferred when no type argument is written.
bySensor.process({
  state: { last: valueState<number>() },
  onRecord(r, ctx) {
    const prev: number | undefined = ctx.state.last.get();
    ctx.state.last.set(r.temp);
    if (prev !== undefined) ctx.emit(prev);
    // @ts-expect-error a misspelled state name
    ctx.state.lsat.clear();
    // @ts-expect-error the state holds numbers
    ctx.state.last.set('warm');
  },
});

// With an explicit output type: process<Out, typeof state>.
const alertState = { last: valueState<number>() };
const alerts = bySensor.process<Alert, typeof alertState>({
  state: alertState,
  onRecord(r, ctx) {
    const prev = ctx.state.last.get();
    ctx.state.last.set(r.temp);
    if (prev !== undefined && Math.abs(r.temp - prev) > 1.5)
      ctx.emit({ sensor: r.sensor, prev, now: r.temp });
    ctx.timers.atEventTime(r.ts + 60_000);
    // @ts-expect-error emits Alerts only
    ctx.emit({ sensor: r.sensor });
  },
  onTimer(_ts, ctx) {
    ctx.state.last.clear();
    // @ts-expect-error a misspelled state name in onTimer
    ctx.state.lsat.clear();
  },
});
expectType<Equal<typeof alerts, KeyedStream<string, Alert>>>(true);

// process<Out> alone cannot infer the state's type: ctx.state then has no handles (not `any`).
bySensor.process<Alert>({
  state: { last: valueState<number>() },
  onRecord(_r, ctx) {
    // @ts-expect-error process<Alert> without typeof state: no typed handles
    ctx.state.last.clear();
  },
});
// A processor without state is fine with one type argument.
bySensor.process<Alert>({ onRecord: (r, ctx) => ctx.emit({ sensor: r.sensor, prev: 0, now: r.temp }) });

// Aggregations keep the key's type.
const counts = byBucket.count();
expectType<Equal<typeof counts, KeyedStream<number, number>>>(true);
app.keyedStream('raw-keyed', { value: bytes() }).to('raw-keyed-out');

// Schema Registry serdes carry the record type, as key and value serdes.
const avroIn = app.stream('avro-in', { key: avro<string>(), value: avro<Reading>() });
expectType<Equal<typeof avroIn, Stream<string, Reading>>>(true);
avroIn.to('avro-out', { value: avro<Reading>({ schema: { type: 'record', name: 'R', fields: [] } }) });
avroIn.to('proto-out', { value: protobuf<Reading>({ schema: 'syntax = "proto3";', messageType: 'R' }) });
const jsonIn = app.stream('js-in', { value: jsonSchema<Alert>() });
expectType<Equal<typeof jsonIn, Stream<string, Alert>>>(true);
// @ts-expect-error a writer of another record type
jsonIn.to('js-out', { value: jsonSchema<Reading>({ schema: {} }) });

// Async operators: the awaited type goes downstream; a sync map's Promise is refused at run time
// (SLUICE_OPERATOR), an async function in filterAsync must give a boolean.
const enriched = bySensor.mapAsync(async (r, ctx) => ({ ...r, at: ctx.offset, aborted: ctx.signal.aborted }));
expectType<
  Equal<
    typeof enriched,
    KeyedStream<
      string,
      { at: string; aborted: boolean; sensor: string; bucket: number; temp: number; ts: number }
    >
  >
>(true);
const hot = app
  .stream('temps', { value: json<Reading>() })
  .filterAsync(async (r) => r.temp > 30, { concurrency: 8 });
expectType<Equal<typeof hot, Stream<string, Reading>>>(true);
// @ts-expect-error filterAsync's function resolves to a boolean
app.stream('temps2', { value: json<Reading>() }).filterAsync(async (r) => r.temp);
// @ts-expect-error an unknown order
bySensor.mapAsync(async (r) => r, { ordered: 'random' });
const asyncSums = { sum: valueState<number>() };
const summed = bySensor.process<number, typeof asyncSums>(
  {
    state: asyncSums,
    async onRecord(r, ctx) {
      const s = (ctx.state.sum.get() ?? 0) + r.temp;
      ctx.state.sum.set(s);
      ctx.emit(s);
    },
  },
  { name: 'async-sum', concurrency: 4, timeoutMs: 1000 },
);
expectType<Equal<typeof summed, KeyedStream<string, number>>>(true);
