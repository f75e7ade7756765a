import { SchemaRegistryError } from '../errors.js';

/** The schema formats of the Confluent API (`schemaType`; absent means AVRO). */
export type SchemaType = 'AVRO' | 'PROTOBUF' | 'JSON';

export interface RegisteredSchema {
  schemaType: SchemaType;
  schema: string;
  references: ReadonlyArray<{ name: string; subject: string; version: number }>;
}

export interface RegistryAuth {
  /** HTTP basic auth (Confluent Cloud: the API key and secret). */
  username?: string | undefined;
  password?: string | undefined;
  /** `Authorization: Bearer <token>` (an OAuth access token). */
  bearerToken?: string | undefined;
}

export interface RegistryClientOptions {
  /** Base URL of the Confluent-compatible API, e.g. `http://registry:8081` or Apicurio's `…/apis/ccompat/v7`. */
  url: string;
  auth?: RegistryAuth | undefined;
  /** Per request. */
  timeoutMs?: number | undefined;
}

const CONTENT_TYPE = 'application/vnd.schemaregistry.v1+json';

/**
 * The registry is not serving right now: no answer (refused, reset, timed out), 5xx, 408 or 429
 * (the error's `retriable`). Waited out, at start and while processing: a registry outage costs
 * latency, not records. A mistake of the job (a serde without a schema, two subjects) is not.
 */
export function registryUnavailable(e: unknown): e is SchemaRegistryError {
  return isRegistryError(e) && (e as { retriable?: unknown }).retriable === true;
}

/**
 * By its code, not `instanceof`: a job's serdes may run in another module instance than the
 * worker's (see serdes.ts, REGISTRY), and the client that threw is the worker's.
 */
const isRegistryError = (e: unknown): e is SchemaRegistryError =>
  (e as { code?: unknown } | null)?.code === 'SLUICE_SCHEMA_REGISTRY';

/**
 * While processing, a failure to fetch a schema is the record's only when the registry answered
 * about that id: a 404 with the registry's own error code (40403: it has no such schema), another
 * 4xx. Unavailable, refusing the credentials it took at start (401/403: rotated, revoked), or a
 * 404 without a registry's error code (a proxy's, a route gone) is not: the records wait.
 */
export function notTheRecords(e: unknown): e is SchemaRegistryError {
  if (registryUnavailable(e)) return true;
  if (!isRegistryError(e)) return false;
  return e.status === 401 || e.status === 403 || (e.status === 404 && e.registryCode === undefined);
}

/** RFC 9110's three HTTP-date forms: IMF-fixdate, the obsolete RFC 850 one and asctime (GMT). */
const IMF_FIXDATE = /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const RFC850_DATE = /^[A-Z][a-z]+, \d{2}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2} GMT$/;
const ASCTIME_DATE = /^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/;

/**
 * An HTTP `Retry-After` (RFC 9110: whole seconds, or an HTTP date) as ms from `now`; undefined when
 * absent or not one of those forms, 0 for a date already past.
 */
export function retryAfterMs(header: string | null, now: number): number | undefined {
  if (header === null) return undefined;
  const h = header.trim();
  if (/^\d{1,9}$/.test(h)) return Number(h) * 1000;
  let at = Number.NaN;
  if (IMF_FIXDATE.test(h) || RFC850_DATE.test(h)) at = Date.parse(h);
  else if (ASCTIME_DATE.test(h)) at = Date.parse(`${h} GMT`); // asctime has no zone: GMT by definition
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * A small client of the Confluent Schema Registry REST API (also served by Apicurio Registry under
 * `/apis/ccompat/v7`, Redpanda and Karapace): fetch a schema by id, register a schema under a
 * subject, look one up. Schemas by id are cached for good (an id never changes its schema); the
 * (subject, schema) → id answers too. Every failure is a {@link SchemaRegistryError} whose message
 * names the URL, the HTTP status and the registry's own message.
 */
export class RegistryClient {
  readonly url: string;
  readonly #headers: Record<string, string>;
  readonly #timeoutMs: number;
  readonly #byId = new Map<number, Promise<RegisteredSchema>>();
  readonly #ids = new Map<string, Promise<number>>();

  constructor(opts: RegistryClientOptions) {
    // fetch refuses a URL with credentials in it (`https://key:secret@host`): they become basic
    // auth (unless auth is given), and the URL that is kept (and shown in errors) has none.
    const u = new URL(opts.url);
    const inUrl =
      u.username !== ''
        ? { username: decodeURIComponent(u.username), password: decodeURIComponent(u.password) }
        : undefined;
    u.username = '';
    u.password = '';
    this.url = u.toString().replace(/\/+$/, '');
    this.#timeoutMs = opts.timeoutMs ?? 10_000;
    this.#headers = { accept: `${CONTENT_TYPE}, application/json` };
    const a: RegistryAuth | undefined =
      opts.auth?.bearerToken || opts.auth?.username !== undefined ? opts.auth : inUrl;
    if (a?.bearerToken) this.#headers.authorization = `Bearer ${a.bearerToken}`;
    else if (a?.username !== undefined)
      this.#headers.authorization = `Basic ${Buffer.from(`${a.username}:${a.password ?? ''}`).toString('base64')}`;
  }

  /** Same registry and credentials (for a serde attached by two workers of one process). */
  sameAs(other: RegistryClient): boolean {
    return this.url === other.url && this.credentials === other.credentials;
  }

  /** The Authorization header sent (compared by {@link sameAs}; public: the other client may come from another module instance). */
  get credentials(): string | undefined {
    return this.#headers.authorization;
  }

  /** The schema registered under `id`; cached, a failure is not (the next call asks again). */
  schemaById(id: number): Promise<RegisteredSchema> {
    let p = this.#byId.get(id);
    if (!p) {
      p = this.#request('GET', `/schemas/ids/${id}`, undefined, `schema id ${id}`).then((b) => {
        // An answer without the schema (a proxy's page, a body cut short) is not the registry's
        // word on the id: not kept, and not the record's fault.
        if (typeof b.schema !== 'string')
          throw new SchemaRegistryError(
            `schema registry ${this.url} answered schema id ${id} without a schema: ${JSON.stringify(b).slice(0, 200)}`,
            { unreachable: true },
          );
        return {
          schemaType: (b.schemaType as SchemaType | undefined) ?? 'AVRO',
          schema: b.schema,
          references: (b.references as RegisteredSchema['references'] | undefined) ?? [],
        };
      });
      this.#byId.set(id, p);
      p.catch(() => this.#byId.delete(id));
    }
    return p;
  }

  /**
   * The id of `schema` under `subject`: registered first when `register` (the registry checks it
   * against the subject's compatibility level and refuses an incompatible one with 409), else looked
   * up (404 when the subject does not hold it).
   */
  idOf(subject: string, type: SchemaType, schema: string, register: boolean): Promise<number> {
    const k = `${register ? 'r' : 'l'}\u0000${subject}\u0000${type}\u0000${schema}`;
    let p = this.#ids.get(k);
    if (!p) {
      const body: Record<string, unknown> = { schema };
      if (type !== 'AVRO') body.schemaType = type;
      const path = `/subjects/${encodeURIComponent(subject)}${register ? '/versions' : ''}`;
      const what = register
        ? `registering ${type === 'AVRO' ? 'an' : 'a'} ${type} schema under subject "${subject}"`
        : `looking up ${type === 'AVRO' ? 'an' : 'a'} ${type} schema under subject "${subject}"`;
      p = this.#request('POST', path, body, what).then((b) => {
        if (typeof b.id !== 'number')
          throw new SchemaRegistryError(
            `${this.url}: ${what}: no id in the answer ${JSON.stringify(b).slice(0, 200)}`,
          );
        return b.id;
      });
      this.#ids.set(k, p);
      p.catch(() => this.#ids.delete(k));
    }
    return p;
  }

  /** Lists the subjects: a reachability and credentials check. */
  async subjects(): Promise<string[]> {
    return (await this.#request('GET', '/subjects', undefined, 'listing subjects')) as unknown as string[];
  }

  async #request(
    method: string,
    path: string,
    body: unknown,
    what: string,
  ): Promise<Record<string, unknown>> {
    const where = `${this.url}${path}`;
    let res: Response;
    try {
      if (this.url.startsWith('mock://')) res = memoryRegistry(this.url, method, path, body);
      else
        res = await fetch(where, {
          method,
          headers: body === undefined ? this.#headers : { ...this.#headers, 'content-type': CONTENT_TYPE },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(this.#timeoutMs),
        });
    } catch (e) {
      const err = e as Error & { cause?: { code?: string; message?: string } };
      const reason =
        err.name === 'TimeoutError'
          ? `no answer within ${this.#timeoutMs} ms`
          : (err.cause?.code ?? err.cause?.message ?? err.message);
      throw new SchemaRegistryError(`schema registry ${this.url} unreachable (${what}): ${reason}`, {
        cause: e,
        unreachable: true,
      });
    }
    let text: string;
    try {
      text = await res.text();
    } catch (e) {
      // The answer's body did not arrive (timed out or reset after the headers): no answer.
      throw new SchemaRegistryError(
        `schema registry ${this.url} unreachable (${what}): its answer was cut short (${(e as Error)?.name ?? e})`,
        { cause: e, unreachable: true },
      );
    }
    let json: unknown;
    try {
      json = text === '' ? {} : JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (!res.ok) {
      const j = (json ?? {}) as { error_code?: unknown; message?: string };
      const msg = j.message ?? text.slice(0, 300);
      const hint =
        res.status === 401 || res.status === 403
          ? ' (check schemaRegistry.auth)'
          : res.status === 409
            ? " (incompatible with the subject's earlier versions under its compatibility level)"
            : res.status === 404 && what.startsWith('looking up')
              ? ' (not registered under this subject, and auto-registration is off)'
              : '';
      throw new SchemaRegistryError(
        `schema registry ${this.url} answered ${res.status} to ${what}${hint}: ${msg}`,
        {
          status: res.status,
          registryCode: typeof j.error_code === 'number' ? j.error_code : undefined,
          retryAfterMs: retryAfterMs(res.headers.get('retry-after'), Date.now()),
        },
      );
    }
    if (json === undefined || typeof json !== 'object' || json === null)
      throw new SchemaRegistryError(`schema registry ${where} answered with no JSON: ${text.slice(0, 200)}`, {
        status: res.status,
        unreachable: true, // a proxy's or a maintenance page: not serving
      });
    return json as Record<string, unknown>;
  }
}

/**
 * `mock://<scope>`: an in-memory registry per scope, for tests without a registry server (the
 * `TestDriver`), as Confluent's clients offer: ids from 1 in registration order, the same schema
 * text gets the same id, no compatibility checks. Answers as the REST API would.
 */
const scopes = new Map<
  string,
  { schemas: Array<{ schemaType: SchemaType; schema: string }>; subjects: Map<string, number[]> }
>();

function memoryRegistry(url: string, method: string, path: string, body: unknown): Response {
  let reg = scopes.get(url);
  if (!reg) scopes.set(url, (reg = { schemas: [], subjects: new Map() }));
  const answer = (status: number, json: unknown) => new Response(JSON.stringify(json), { status });
  if (method === 'GET' && path === '/subjects') return answer(200, [...reg.subjects.keys()]);
  const byId = /^\/schemas\/ids\/(\d+)$/.exec(path);
  if (method === 'GET' && byId) {
    const s = reg.schemas[Number(byId[1]) - 1];
    return s
      ? answer(200, { schema: s.schema, schemaType: s.schemaType, references: [] })
      : answer(404, { error_code: 40403, message: `Schema ${byId[1]} not found` });
  }
  const subj = /^\/subjects\/([^/]+)(\/versions)?$/.exec(path);
  if (method === 'POST' && subj) {
    const subject = decodeURIComponent(subj[1]!);
    const b = body as { schema: string; schemaType?: SchemaType };
    const schemaType = b.schemaType ?? 'AVRO';
    let id = reg.schemas.findIndex((s) => s.schema === b.schema && s.schemaType === schemaType) + 1;
    const versions = reg.subjects.get(subject) ?? [];
    if (!subj[2]) {
      if (id > 0 && versions.includes(id))
        return answer(200, { id, subject, version: versions.indexOf(id) + 1 });
      return answer(404, {
        error_code: versions.length ? 40403 : 40401,
        message: `Subject '${subject}' has no such schema`,
      });
    }
    if (id === 0) id = reg.schemas.push({ schemaType, schema: b.schema });
    if (!versions.includes(id)) reg.subjects.set(subject, [...versions, id]);
    return answer(200, { id });
  }
  return answer(404, { error_code: 404, message: `${method} ${path}: not served by mock://` });
}
