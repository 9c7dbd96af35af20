/** The engine's identity (docs/engine.md: the service pins `engine_version` 3.0.0, protocol minor 3). */
export const ENGINE_VERSION = '3.0.0';
export const PROTOCOL_MINOR = 3;
export const PRODUCT = 'svc-engine';
