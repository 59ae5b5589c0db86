import type { ApiError as ApiErrorDocument, JobDocument } from "./types.gen.js";

/** Every error this library throws. */
export class CordonError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * The service answered with an error: its status and, when it sent one, its
 * `cordon.api-error/v1` document.
 */
export class CordonApiError extends CordonError {
  /** The HTTP status. */
  readonly status: number;
  /** The document's stable code (`policy`, `busy`, …), or `http_<status>` without one. */
  readonly code: string;
  /** The service's error document, as it answered. */
  readonly document: ApiErrorDocument | undefined;
  /**
   * Seconds to wait before trying again: the `Retry-After` header when the server sent one,
   * else what the document says (`resets_at` of a `budget`); `undefined` when neither does.
   */
  readonly retryAfter: number | undefined;

  constructor(status: number, document: ApiErrorDocument | undefined, message: string, retryAfter?: number) {
    super(message);
    this.status = status;
    this.document = document;
    this.code = document?.error ?? `http_${status}`;
    this.retryAfter = retryAfter;
  }
}

/** 400: the request is malformed (the message names the field). */
export class BadRequestError extends CordonApiError {}
/** 401: no valid bearer token. */
export class UnauthorizedError extends CordonApiError {}
/** 403 `forbidden`: the token lacks the scope. */
export class ForbiddenError extends CordonApiError {}
/** 403 `policy`: the project's policy refuses the job; `rule` names the rule. */
export class PolicyError extends CordonApiError {
  get rule(): string | undefined {
    return this.document?.rule ?? undefined;
  }
}
/** 404: no such job visible to this token. */
export class NotFoundError extends CordonApiError {}
/**
 * 409: the idempotency key already names a job submitted with a different type or inputs;
 * `existingJobId` names it.
 */
export class ConflictError extends CordonApiError {
  get existingJobId(): string | undefined {
    return this.document?.job ?? undefined;
  }
}
/** 413: the request body is larger than the server takes. */
export class PayloadTooLargeError extends CordonApiError {}
/** 429: try again later (`retryAfter` seconds). */
export class RateLimitedError extends CordonApiError {}
/** 429 `busy`: the project's queue is full, or the token holds too many live logs open. */
export class BusyError extends RateLimitedError {}
/** 429 `budget`: the project's daily budget is spent until `resetsAt`. */
export class BudgetError extends RateLimitedError {
  get resetsAt(): Date | undefined {
    const at = this.document?.resets_at;
    return at ? new Date(at) : undefined;
  }
}
/** 5xx: the server failed. */
export class ServerError extends CordonApiError {}

/** The server could not be reached, or the connection broke (after the retries allowed). */
export class CordonConnectionError extends CordonError {}

/** `wait` ran out of time before the job ended. */
export class WaitTimeoutError extends CordonError {
  readonly jobId: string;
  constructor(jobId: string, timeoutMs: number) {
    super(`job ${jobId} did not end within ${timeoutMs} ms`);
    this.jobId = jobId;
  }
}

/** A job of a chain did not succeed (or a verify ended without a report). */
export class JobFailedError extends CordonError {
  readonly job: JobDocument;
  constructor(job: JobDocument, what?: string) {
    const why = job.failure ? `: ${job.failure.category}: ${job.failure.reason}` : "";
    super(what ?? `${job.type} job ${job.id} ended ${job.state}${why}`);
    this.job = job;
  }
}

/** Seconds in a `Retry-After` value (delta-seconds or an HTTP date), if it is one. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

/** The error an answer that is not 2xx stands for. */
export function errorFromAnswer(
  status: number,
  headers: { get(name: string): string | null },
  body: string,
  now: number = Date.now(),
): CordonApiError {
  let document: ApiErrorDocument | undefined;
  try {
    const parsed: unknown = JSON.parse(body);
    if (parsed && typeof parsed === "object" && (parsed as ApiErrorDocument).schema === "cordon.api-error/v1") {
      document = parsed as ApiErrorDocument;
    }
  } catch {
    // Not JSON (a proxy's page, axum's 413): the status alone speaks.
  }
  let retryAfter = parseRetryAfter(headers.get("retry-after"), now);
  if (retryAfter === undefined && document?.resets_at) {
    const at = Date.parse(document.resets_at);
    if (!Number.isNaN(at)) retryAfter = Math.max(0, Math.ceil((at - now) / 1000));
  }
  const message = document
    ? `${status} ${document.error}: ${document.message}${document.rule ? ` (rule ${document.rule})` : ""}`
    : `${status}: ${body.trim().slice(0, 200) || "no error document"}`;
  const code = document?.error;
  const make = (): typeof CordonApiError => {
    if (status === 400) return BadRequestError;
    if (status === 401) return UnauthorizedError;
    if (status === 403) return code === "policy" ? PolicyError : ForbiddenError;
    if (status === 404) return NotFoundError;
    if (status === 409) return ConflictError;
    if (status === 413) return PayloadTooLargeError;
    if (status === 429) return code === "budget" ? BudgetError : code === "busy" ? BusyError : RateLimitedError;
    if (status >= 500) return ServerError;
    return CordonApiError;
  };
  return new (make())(status, document, message, retryAfter);
}
