import { createRequire } from 'node:module';
import type { Serde } from '../api/serdes.js';
import { SchemaRegistryError, SerdeError, safeString } from '../errors.js';
import { notTheRecords, type RegisteredSchema, type RegistryClient, type SchemaType } from './client.js';
import { frame, HEADER_BYTES, peekSchemaId, readMessageIndexes, schemaIdOf } from './wire.js';

// The codecs are loaded on first use: a job without registry serdes never loads them.
const require = createRequire(import.meta.url);
type Avsc = typeof import('avsc');
type Protobufjs = typeof import('protobufjs');
type AjvClass = typeof import('ajv').default;
let avscLib: Avsc | undefined;
let protobufLib: Protobufjs | undefined;
let ajvLib: InstanceType<AjvClass> | undefined;
const avsc = (): Avsc => (avscLib ??= require('avsc') as Avsc);
const protobufjs = (): Protobufjs => (protobufLib ??= require('protobufjs') as Protobufjs);
function ajv(): InstanceType<AjvClass> {
  if (!ajvLib) {
    const Ajv = (require('ajv') as { default: AjvClass }).default;
    // strict off: a schema written for another validator (unknown keywords, formats) still loads.
    ajvLib = new Ajv({ strict: false, allErrors: false, validateFormats: false });
  }
  return ajvLib;
}

/**
 * How the subject a writer registers under is named (Confluent's `*SubjectNameStrategy`):
 * `topic` → `<topic>-key` / `<topic>-value` (the default), `record` → the record's full name,
 * `topic-record` → `<topic>-<record full name>`.
 */
export type SubjectNameStrategy = 'topic' | 'record' | 'topic-record';

export interface RegistrySerdeOptions {
  /** Register the writer's schema at start (default `schemaRegistry.autoRegister`, itself `true`); off: it must be registered already. */
  autoRegister?: boolean;
  /** Default `topic`. */
  subjectNameStrategy?: SubjectNameStrategy;
  /** A subject name to use whatever the strategy. */
  subject?: string;
}

/**
 * After a schema fetch failed for the records (an id the registry does not have), records with
 * that id are dead-lettered for this long before the next try.
 */
export const FAILED_FETCH_RETRY_MS = 5_000;

type Decoder = (bytes: Buffer) => unknown;

/** What a format contributes to a {@link RegistrySerde}. */
interface Format {
  type: SchemaType;
  /** The writer's side, when the serde was given a schema. */
  writer?: {
    schema: string;
    /** Full name for the `record` strategies (undefined: the schema has none). */
    recordName: string | undefined;
    encode(value: unknown): Uint8Array;
    messageIndexes?: readonly number[];
  };
  /** A decoder for bytes written with this registered schema. */
  decoder(s: RegisteredSchema, id: number): Decoder;
}

/**
 * The hooks the worker uses (src/registry/prepare.ts); not part of the public API. A registered
 * symbol: a job file may get its `sluice` from another module instance than the CLI's (tsx's
 * loader, a CommonJS `require` beside an ESM import), and its serdes must still be found.
 * @internal
 */
export const REGISTRY: unique symbol = Symbol.for('sluice.registry.v1') as never;

/** @internal */
export interface RegistryBinding {
  readonly format: SchemaType;
  readonly canWrite: boolean;
  attach(client: RegistryClient, autoRegisterDefault: boolean): void;
  /** The schema id of `bytes` when it has not been loaded yet (and is not waiting out a failure). */
  missing(bytes: Buffer | null, now: number): number | undefined;
  /**
   * Fetches and compiles schema `id`. A failure that is the record's (the registry has no such
   * id, the schema is of another format or does not compile) is kept for the records that use it;
   * when the registry is not serving ({@link notTheRecords}) nothing is kept and the error is the
   * result: those records wait. Never rejects.
   */
  load(id: number): Promise<SchemaRegistryError | undefined>;
  /**
   * Resolves the writer's schema id for `topic` (registering it when auto-registration is on), and
   * loads it for reading too (the `TestDriver` reads its outputs with the sink's serdes).
   */
  bindWriter(topic: string, isKey: boolean): Promise<void>;
  /** A new serde of the same format and options, attached to nothing (the TestDriver's input writers). */
  fork(): RegistrySerde<unknown>;
}

/** A Schema Registry serde: a {@link Serde} plus the worker's hooks. */
export interface RegistrySerde<T> extends Serde<T> {
  /** @internal */
  readonly [REGISTRY]: RegistryBinding;
}

export function isRegistrySerde(s: unknown): s is RegistrySerde<unknown> {
  return typeof s === 'object' && s !== null && REGISTRY in s;
}

function makeSerde<T>(name: string, f: Format, opts: RegistrySerdeOptions): RegistrySerde<T> {
  let client: RegistryClient | undefined;
  let autoRegister = opts.autoRegister;
  const decoders = new Map<number, Decoder>();
  const failed = new Map<number, { error: string; until: number }>();
  const loading = new Map<number, Promise<SchemaRegistryError | undefined>>();
  let writerId: number | undefined;
  let writerSubject: string | undefined;

  const subjectOf = (topic: string, isKey: boolean): string => {
    if (opts.subject !== undefined) return opts.subject;
    const strategy = opts.subjectNameStrategy ?? 'topic';
    if (strategy === 'topic') return `${topic}-${isKey ? 'key' : 'value'}`;
    const rn = f.writer?.recordName;
    if (rn === undefined)
      throw new SchemaRegistryError(
        `${name}() with subjectNameStrategy '${strategy}' needs a named record schema (Avro: a record, ` +
          'Protobuf: a message type, JSON Schema: a title)',
      );
    return strategy === 'record' ? rn : `${topic}-${rn}`;
  };

  const binding: RegistryBinding = {
    format: f.type,
    canWrite: f.writer !== undefined,
    attach(c, autoDefault) {
      if (client && !client.sameAs(c))
        throw new SchemaRegistryError(
          `this ${name}() serde is already attached to the registry ${client.url}: a serde object ` +
            'serves one registry; make one per job for jobs on different registries',
        );
      client ??= c;
      autoRegister ??= autoDefault;
    },
    missing(bytes, now) {
      const id = peekSchemaId(bytes);
      if (id === undefined || decoders.has(id)) return undefined;
      const fail = failed.get(id);
      return fail !== undefined && fail.until > now ? undefined : id;
    },
    load(id) {
      let p = loading.get(id);
      if (p) return p;
      p = (async () => {
        try {
          if (!client)
            throw new SchemaRegistryError(`${name}() serde has no registry (set schemaRegistry.url)`);
          const s = await client.schemaById(id);
          if (s.schemaType !== f.type)
            throw new SerdeError(
              `schema id ${id} is a ${s.schemaType} schema, not ${f.type} as ${name}() reads`,
            );
          decoders.set(id, f.decoder(s, id));
          failed.delete(id);
          return undefined;
        } catch (e) {
          if (notTheRecords(e)) return e;
          failed.set(id, {
            error: (e as Error)?.message ?? safeString(e),
            until: Date.now() + FAILED_FETCH_RETRY_MS,
          });
          return undefined;
        } finally {
          loading.delete(id);
        }
      })();
      loading.set(id, p);
      return p;
    },
    async bindWriter(topic, isKey) {
      const w = f.writer;
      if (!w)
        throw new SchemaRegistryError(
          `${name}() writes to topic "${topic}" but was given no schema: pass { schema } to write`,
        );
      if (!client) throw new SchemaRegistryError(`${name}() serde has no registry (set schemaRegistry.url)`);
      const subject = subjectOf(topic, isKey);
      if (writerSubject !== undefined && writerSubject !== subject)
        throw new SchemaRegistryError(
          `one ${name}() serde object writes under two subjects ("${writerSubject}" and "${subject}"): ` +
            "make one serde per sink topic (and for keys and values), or use subjectNameStrategy 'record'",
        );
      writerSubject = subject;
      writerId = await client.idOf(subject, f.type, w.schema, autoRegister ?? true);
      const down = await binding.load(writerId);
      if (down) throw down;
    },
    fork: () => makeSerde(name, f, opts),
  };

  return {
    name,
    fingerprint: `${name}-confluent`,
    [REGISTRY]: binding,
    serialize(value: T): Buffer | null {
      if (value === null || value === undefined) return null;
      const w = f.writer;
      if (!w) throw new SerdeError(`${name}() was given no schema, so it cannot write`);
      if (writerId === undefined)
        throw new SerdeError(
          `${name}() has no schema id to write with: it is resolved at worker start for sink topics only ` +
            '(not for state stores)',
        );
      let payload: Uint8Array;
      try {
        payload = w.encode(value);
      } catch (e) {
        throw new SerdeError(
          `cannot write ${f.type} with schema id ${writerId}: ${(e as Error)?.message ?? safeString(e)}`,
          e,
        );
      }
      return frame(writerId, payload, w.messageIndexes);
    },
    deserialize(bytes: Buffer | null): T {
      if (bytes === null) return null as T;
      const id = schemaIdOf(bytes);
      const dec = decoders.get(id);
      if (dec === undefined) {
        const fail = failed.get(id);
        throw new SerdeError(
          fail
            ? `cannot read schema id ${id}: ${fail.error}`
            : `schema id ${id} was not fetched from the registry before this record was read`,
        );
      }
      try {
        return dec(bytes) as T;
      } catch (e) {
        if (e instanceof SerdeError) throw e;
        throw new SerdeError(
          `cannot read ${f.type} with schema id ${id}: ${(e as Error)?.message ?? safeString(e)}`,
          e,
        );
      }
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Avro (avsc)

export interface AvroOptions extends RegistrySerdeOptions {
  /**
   * The Avro schema (an object or its JSON text). Writing needs it. Reading without it decodes
   * with each record's writer schema; with it, records are resolved to it (schema evolution:
   * added fields with defaults, removed fields), and a writer schema it cannot read is an error.
   */
  schema?: object | string;
}

/**
 * Avro in the Confluent wire format, through the Schema Registry in `schemaRegistry` (config).
 * @example app.stream('orders', { value: avro<Order>() }).to('big', { value: avro({ schema: bigOrder }) })
 */
export function avro<T = unknown>(opts: AvroOptions = {}): RegistrySerde<T> {
  const readerType = opts.schema === undefined ? undefined : avroType(opts.schema, 'the given schema');
  return makeSerde<T>(
    'avro',
    {
      type: 'AVRO',
      writer: readerType && {
        // As given: avsc's schema() would drop defaults, which the registry's compatibility check needs.
        schema: typeof opts.schema === 'string' ? opts.schema : JSON.stringify(opts.schema),
        recordName: (readerType as { name?: string }).name ?? undefined,
        encode: (v) => readerType.toBuffer(v),
      },
      decoder(s, id) {
        if (s.references.length > 0)
          throw new SerdeError(`schema id ${id} has references, which avro() does not resolve`);
        const writer = avroType(s.schema, `schema id ${id}`);
        if (!readerType) return (b) => writer.fromBuffer(b.subarray(HEADER_BYTES));
        let resolver: ReturnType<typeof readerType.createResolver>;
        try {
          resolver = readerType.createResolver(writer);
        } catch (e) {
          throw new SerdeError(`the reader schema cannot read schema id ${id}: ${(e as Error).message}`);
        }
        return (b) => readerType.fromBuffer(b.subarray(HEADER_BYTES), resolver);
      },
    },
    opts,
  );
}

function avroType(schema: object | string, what: string) {
  try {
    return avsc().Type.forSchema((typeof schema === 'string' ? JSON.parse(schema) : schema) as never);
  } catch (e) {
    throw new SerdeError(`${what} is no valid Avro schema: ${(e as Error).message}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Protobuf (protobufjs)

export interface ProtobufOptions extends RegistrySerdeOptions {
  /** The `.proto` file's text (`syntax = "proto3"; …`). Writing needs it and `messageType`. */
  schema?: string;
  /** The full name of the message written, e.g. `shop.Order`. Default: the file's first message. */
  messageType?: string;
}

/**
 * Protobuf in the Confluent wire format (with the message-index array). Values are plain objects
 * (protobufjs `toObject` with defaults; 64-bit integers and enums as strings).
 * @example app.stream('orders', { value: protobuf<Order>() })
 */
export function protobuf<T = unknown>(opts: ProtobufOptions = {}): RegistrySerde<T> {
  let writer: Format['writer'];
  if (opts.schema !== undefined) {
    const root = protoRoot(opts.schema, 'the given schema');
    const { type, indexes } = protoMessage(root.root, root.pkg, opts.messageType, 'the given schema');
    writer = {
      schema: opts.schema,
      recordName: type.fullName.replace(/^\./, ''),
      messageIndexes: indexes,
      encode(v) {
        // Strict on types (a string where a number belongs is an error, not a silent 0), but 64-bit
        // integers may be decimal strings: what deserialize gives back.
        const value = withLongs(type, v);
        const problem = type.verify(value);
        if (problem) throw new Error(problem);
        return type.encode(type.fromObject(value)).finish();
      },
    };
  }
  return makeSerde<T>(
    'protobuf',
    {
      type: 'PROTOBUF',
      writer,
      decoder(s, id) {
        // Google's well-known types are built in (protobufjs ships them); other references are not resolved.
        const foreign = s.references.filter((r) => !WELL_KNOWN.test(r.name));
        if (foreign.length > 0)
          throw new SerdeError(
            `schema id ${id} imports ${foreign.map((r) => r.name).join(', ')} (schema references), which protobuf() does not resolve`,
          );
        const { root, pkg } = protoRoot(s.schema, `schema id ${id}`);
        const byPath = new Map<string, import('protobufjs').Type>();
        return (b) => {
          const { indexes, next } = readMessageIndexes(b);
          const k = indexes.join('.');
          let type = byPath.get(k);
          if (!type) {
            type = typeAt(root, pkg, indexes, id);
            byPath.set(k, type);
          }
          const msg = type.decode(b.subarray(next));
          return type.toObject(msg, { defaults: true, longs: String, enums: String });
        };
      },
    },
    opts,
  );
}

type LongClass = { fromString(s: string, unsigned?: boolean): unknown };
const LONG_TYPES = new Set(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);
const DECIMAL = /^-?\d+$/;

/** `v` with the decimal strings of its 64-bit integer fields (at any depth) as protobufjs Longs. */
function withLongs(type: import('protobufjs').Type, v: unknown): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return v as Record<string, unknown>;
  const pb = protobufjs();
  const src = v as Record<string, unknown>;
  let out: Record<string, unknown> | undefined;
  for (const field of type.fieldsArray) {
    const x = src[field.name];
    if (x === undefined || x === null) continue;
    field.resolve();
    const sub = field.resolvedType instanceof pb.Type ? field.resolvedType : undefined;
    const one = (e: unknown): unknown =>
      sub
        ? withLongs(sub, e)
        : LONG_TYPES.has(field.type) && typeof e === 'string' && DECIMAL.test(e)
          ? (pb.util.Long as unknown as LongClass).fromString(
              e,
              field.type.startsWith('u') || field.type === 'fixed64',
            )
          : e;
    if (!sub && !LONG_TYPES.has(field.type)) continue;
    let y: unknown;
    if (field.repeated && Array.isArray(x)) y = x.map(one);
    else if (field.map && typeof x === 'object')
      y = Object.fromEntries(Object.entries(x as Record<string, unknown>).map(([k, e]) => [k, one(e)]));
    else y = one(x);
    if (y !== x) (out ??= { ...src })[field.name] = y;
  }
  return out ?? src;
}

const WELL_KNOWN = /^google\/protobuf\/[a-z_]+\.proto$/;

function protoRoot(text: string, what: string) {
  try {
    const pb = protobufjs();
    const parsed = pb.parse(text, { keepCase: true });
    for (const name of [...(parsed.imports ?? []), ...(parsed.weakImports ?? [])]) {
      const known = WELL_KNOWN.test(name) ? pb.common.get(name) : undefined;
      if (!known)
        throw new Error(
          `it imports ${name}: only Google's well-known types (google/protobuf/*.proto) are resolved`,
        );
      parsed.root.addJSON(known.nested!);
    }
    parsed.root.resolveAll();
    return { root: parsed.root, pkg: parsed.package };
  } catch (e) {
    throw new SerdeError(`${what} is no usable Protobuf schema: ${(e as Error).message}`);
  }
}

/** The file's message types at one level, in declaration order (what message indexes count). */
function messagesOf(ns: import('protobufjs').NamespaceBase): import('protobufjs').Type[] {
  const T = protobufjs().Type;
  return ns.nestedArray.filter((n): n is import('protobufjs').Type => n instanceof T);
}

function fileNamespace(root: import('protobufjs').Root, pkg: string | undefined) {
  return pkg ? (root.lookup(pkg) as import('protobufjs').Namespace) : root;
}

function protoMessage(
  root: import('protobufjs').Root,
  pkg: string | undefined,
  name: string | undefined,
  what: string,
) {
  const top = messagesOf(fileNamespace(root, pkg));
  if (top.length === 0) throw new SerdeError(`${what} has no message type`);
  if (name === undefined) return { type: top[0]!, indexes: [0] };
  const want = name.replace(/^\./, '');
  const path: number[] = [];
  const walk = (types: import('protobufjs').Type[]): import('protobufjs').Type | undefined => {
    for (let i = 0; i < types.length; i++) {
      path.push(i);
      const t = types[i]!;
      if (t.fullName.replace(/^\./, '') === want) return t;
      const inner = walk(messagesOf(t));
      if (inner) return inner;
      path.pop();
    }
    return undefined;
  };
  const type = walk(top);
  if (!type) throw new SerdeError(`${what} has no message type ${want}`);
  return { type, indexes: path };
}

function typeAt(
  root: import('protobufjs').Root,
  pkg: string | undefined,
  indexes: readonly number[],
  id: number,
) {
  let types = messagesOf(fileNamespace(root, pkg));
  let t: import('protobufjs').Type | undefined;
  for (const i of indexes) {
    t = types[i];
    if (!t) throw new SerdeError(`schema id ${id} has no message at indexes [${indexes.join(', ')}]`);
    types = messagesOf(t);
  }
  return t!;
}

// ---------------------------------------------------------------------------------------------
// JSON Schema (ajv)

export interface JsonSchemaOptions extends RegistrySerdeOptions {
  /** The JSON Schema (object or text). Writing needs it; values are validated against it before writing. */
  schema?: object | string;
  /** Validate what is read against its writer's schema (default true). */
  validate?: boolean;
}

/**
 * JSON in the Confluent wire format, validated with a JSON Schema (ajv) on both sides.
 * @example app.stream('orders', { value: jsonSchema<Order>({ schema: orderSchema }) })
 */
export function jsonSchema<T = unknown>(opts: JsonSchemaOptions = {}): RegistrySerde<T> {
  let writer: Format['writer'];
  if (opts.schema !== undefined) {
    const obj =
      typeof opts.schema === 'string' ? parseSchemaJson(opts.schema, 'the given schema') : opts.schema;
    const check = compileJson(obj, 'the given schema');
    writer = {
      schema: typeof opts.schema === 'string' ? opts.schema : JSON.stringify(opts.schema),
      recordName:
        typeof (obj as { title?: unknown }).title === 'string' ? (obj as { title: string }).title : undefined,
      encode(v) {
        if (!check(v)) throw new Error(`does not match the schema: ${ajv().errorsText(check.errors)}`);
        return Buffer.from(JSON.stringify(v), 'utf8');
      },
    };
  }
  const validate = opts.validate ?? true;
  const decoder = new TextDecoder('utf-8', { fatal: true });
  return makeSerde<T>(
    'json-schema',
    {
      type: 'JSON',
      writer,
      decoder(s, id) {
        if (s.references.length > 0)
          throw new SerdeError(`schema id ${id} has references, which jsonSchema() does not resolve`);
        const check = validate
          ? compileJson(parseSchemaJson(s.schema, `schema id ${id}`), `schema id ${id}`)
          : undefined;
        return (b) => {
          let v: unknown;
          try {
            v = JSON.parse(decoder.decode(b.subarray(HEADER_BYTES)));
          } catch (e) {
            throw new SerdeError(`invalid JSON with schema id ${id}: ${(e as Error).message}`);
          }
          if (check && !check(v))
            throw new SerdeError(`JSON does not match schema id ${id}: ${ajv().errorsText(check.errors)}`);
          return v;
        };
      },
    },
    opts,
  );
}

function parseSchemaJson(text: string, what: string): object {
  try {
    return JSON.parse(text) as object;
  } catch (e) {
    throw new SerdeError(`${what} is no JSON: ${(e as Error).message}`);
  }
}

function compileJson(schema: object | boolean, what: string) {
  try {
    // The registry hands out one schema text per id: compile each once (ajv caches by the object).
    const copy = typeof schema === 'object' ? { ...schema } : schema;
    // $id would clash between two versions of one schema; $schema names drafts ajv's default
    // instance does not load (it validates as draft-07).
    if (typeof copy === 'object') {
      delete (copy as { $id?: unknown }).$id;
      delete (copy as { $schema?: unknown }).$schema;
    }
    return ajv().compile(copy);
  } catch (e) {
    throw new SerdeError(`${what} is no usable JSON Schema: ${(e as Error).message}`);
  }
}
