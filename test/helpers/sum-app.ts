import { App, json, string, valueState } from '../../src/index.js';

/**
 * A keyed running sum: a `process` named `name` with one `valueState` (store `<name>-acc`) on the
 * source key, emitting `{ sum }` to `out` for every record.
 */
export function sumApp(id: string, name = 'p'): App {
  const a = new App({ id });
  a.keyedStream('in', { key: string(), value: json<{ n: number }>() })
    .process(
      {
        state: { acc: valueState<number>() },
        onRecord(v, ctx) {
          const sum = (ctx.state.acc.get() ?? 0) + v.n;
          ctx.state.acc.set(sum);
          ctx.emit({ sum });
        },
      },
      { name },
    )
    .to('out', { key: string(), value: json() });
  return a;
}
