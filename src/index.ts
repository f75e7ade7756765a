/**
 * Sluice's public API. A job file's default export is an {@link App}.
 * @example
 * import { App, json } from 'sluice';
 * const app = new App({ id: 'enrich' });
 * app.stream('clicks', { value: json<{ page: string; bot: boolean }>() }).filter((c) => !c.bot).to('human-clicks');
 * export default app;
 */
export { App, type AppOptions, type SerdesFor, type StreamOptions } from './api/app.js';
export type { AsyncContext, AsyncOptions, AsyncOrder } from './api/async.js';
export type {
  ConnectProcessor,
  ProcessContext,
  Processor,
  RecordContext,
  TimerContext,
  Timers,
} from './api/context.js';
export { bytes, json, number, type Serde, type Serdes, string } from './api/serdes.js';
export {
  type ListState,
  listState,
  type MapState,
  mapState,
  type StateDescriptor,
  type ValueState,
  valueState,
} from './api/state.js';
export {
  type AggregateOptions,
  type AsyncOperatorOptions,
  ConnectedStreams,
  KeyedStream,
  type NamedOptions,
  type OperatorOptions,
  Stream,
  type StreamJoinOptions,
  Table,
  WindowedStream,
} from './api/stream.js';
export {
  hopping,
  session,
  sliding,
  tumbling,
  type WindowBounds,
  type Windowed,
  type WindowOptions,
  type WindowSpec,
} from './api/windows.js';
export { loadConfig } from './config/load.js';
export type { SluiceConfig, SluiceConfigInput } from './config/schema.js';
export {
  ConfigError,
  type ConfigProblem,
  ERROR_CODES,
  type ErrorCode,
  SchemaRegistryError,
  SluiceError,
  TaskCorruptedError,
  TaskMigratedError,
} from './errors.js';
export {
  type AvroOptions,
  avro,
  type JsonSchemaOptions,
  jsonSchema,
  type ProtobufOptions,
  protobuf,
  type RegistrySerde,
  type RegistrySerdeOptions,
  type SubjectNameStrategy,
} from './registry/serdes.js';
export { type RunningWorker, startWorker } from './runtime/start.js';
export type { ErrorPolicy } from './topology/nodes.js';
