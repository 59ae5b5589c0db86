/**
 * `@cordon/client`: a typed client of cordon's job service (`cordon serve`), with no runtime
 * dependencies (the platform's `fetch`, a small Server-Sent Events reader).
 */
export * from "./client.js";
export * from "./errors.js";
export { SseParser, type SseMessage } from "./sse.js";
export type * from "./types.gen.js";
