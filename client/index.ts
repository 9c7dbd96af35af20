/**
 * svc-cloud's TypeScript SDK, imported as `svc-cloud/client` (docs/sdk.md). Runs in Node ≥ 20 and in
 * browsers: fetch, web streams and Web Crypto only.
 */
export { createClient, SvcClient, ProjectsApi } from './client.ts';
export { ProjectClient } from './project.ts';
export { SnapshotsApi, ReplacedApi, KeysApi, SecretsApi, RealtimeApi, ReceiptsApi } from './project-apis.ts';
export { FunctionsApi, type DeployOptions, type InvokeInit } from './functions.ts';
export { SvcError, RealtimeOverflowError, ENGINE_ERROR_CODES, type ErrorCode, type EngineErrorCode, type ErrorSource } from './errors.ts';
export { decodeEnvelope, encodeEnvelope, EnvelopeError, ENVELOPE_MAGIC, PRODUCT_CONTENT_TYPE } from './envelope.ts';
export { PROTOCOL_MINOR, type SearchOptions } from './dataplane.ts';
export type { ClientOptions, CallOptions } from './http.ts';
export type { Pages } from './pages.ts';
export type { SubscribeOptions } from './realtime.ts';
export type { InArgs, InStatement, InValue, ResultSet, Row, Value } from './results.ts';
export { objectPath, StorageClient, type Download, type DownloadOptions, type ListObjectsInput, type ObjectHead, type UploadBody, type UploadOptions } from './storage.ts';
export type * from './types.ts';
