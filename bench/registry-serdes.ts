/**
 * Micro-benchmark of the Schema Registry serdes against json(): serialize and deserialize of one
 * small record, schemas already resolved (the per-record path a worker runs). Starts a real
 * Apicurio Registry (test/helpers/registry.ts) for the start-time registration. Prints records/s.
 *
 *   npm run build && node dist/bench/registry-serdes.js [records=300000]
 */
import { App, avro, json, protobuf, type Serde } from '../src/index.js';
import type { InRecord } from '../src/kafka/types.js';
import { prepareSchemas } from '../src/registry/prepare.js';
import { startRegistry } from '../test/helpers/registry.js';

const N = Number(process.argv[2] ?? 300_000);
const USER = {
  type: 'record',
  name: 'U',
  fields: [
    { name: 'id', type: 'int' },
    { name: 'name', type: 'string' },
    { name: 'score', type: 'double' },
  ],
};
const PROTO = 'syntax = "proto3"; message U { int32 id = 1; string name = 2; double score = 3; }';

const reg = await startRegistry();
try {
  const aw = avro({ schema: USER });
  const ar = avro({ schema: USER });
  const pw = protobuf({ schema: PROTO });
  const pr = protobuf();
  const app = new App({ id: 'bench-serdes' });
  app.stream('b-avro', { value: ar }).to('b-avro-out', { value: aw });
  app.stream('b-proto', { value: pr }).to('b-proto-out', { value: pw });
  const schemas = await prepareSchemas(app.topology(), {
    schemaRegistry: { url: reg.url, auth: {}, autoRegister: true, timeoutMs: 5000 },
  });
  const v = { id: 7, name: 'some user name', score: 0.5 };
  const cases: Array<[string, Serde<unknown>, Serde<unknown>, string | undefined]> = [
    ['avro', aw, ar, 'b-avro'],
    ['protobuf', pw, pr, 'b-proto'],
    ['json', json(), json(), undefined],
  ];
  for (const [label, w, r, topic] of cases) {
    const b = w.serialize(v)!;
    if (topic) await schemas.before(topic, [{ key: null, value: b } as unknown as InRecord], async () => {});
    let t = performance.now();
    for (let i = 0; i < N; i++) w.serialize(v);
    const ser = N / ((performance.now() - t) / 1000);
    t = performance.now();
    for (let i = 0; i < N; i++) r.deserialize(b);
    const de = N / ((performance.now() - t) / 1000);
    console.log(
      `${label.padEnd(8)} ${String(b.length).padStart(3)} bytes  serialize ${Math.round(ser).toLocaleString('en')}/s  deserialize ${Math.round(de).toLocaleString('en')}/s`,
    );
  }
} finally {
  await reg.stop();
}
