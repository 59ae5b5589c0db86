import {
  CordonConnectionError,
  CordonError,
  JobFailedError,
  WaitTimeoutError,
  errorFromAnswer,
} from "./errors.js";
import { SseParser } from "./sse.js";
import type {
  JobDocument,
  JobFailure,
  JobList,
  JobRequest,
  RunReport,
  StageStatus,
  WireState,
} from "./types.gen.js";

/** The library's version: cordon's. */
export const VERSION = "0.1.0";

/** How the client talks to the service. Times are in milliseconds. */
export interface ClientOptions {
  /** The service, e.g. `http://127.0.0.1:7878`. */
  baseUrl: string;
  /** An API token (`cordon token create`). */
  token: string;
  /** The `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
  /** Retries of a request that may be retried (see the README), at most: 3. */
  maxRetries?: number;
  /** The first backoff, doubled each retry (with jitter): 250. */
  retryDelay?: number;
  /**
   * The longest wait before a retry: 30000. A 429 whose `Retry-After` is longer (a spent
   * daily budget) is thrown at once instead.
   */
  maxRetryDelay?: number;
  /** Time for one request's answer to begin (and a JSON body to arrive): 30000. */
  requestTimeout?: number;
  /**
   * A live log that sends nothing (not even its 15 s keep-alive) this long is taken for a
   * dropped connection and resumed: 45000.
   */
  streamIdleTimeout?: number;
  /** Told before each retry (of a request, or a live log's reconnect). */
  onRetry?: (retry: RetryInfo) => void | Promise<void>;
}

/** What `onRetry` is told. */
export interface RetryInfo {
  method: string;
  path: string;
  /** 1 for the first retry. */
  attempt: number;
  /** How long the client waits before it, in milliseconds. */
  delay: number;
  /** What went wrong: an error answer or a connection error. */
  error: CordonError;
}

/** A job as the service describes it (`cordon.job/v1`). */
export type Job = JobDocument;

/** The states in which a job stays. */
export const FINAL_STATES: readonly WireState[] = ["succeeded", "failed", "cancelled", "interrupted"];

/** A `state` event: the job's state changed (`retry`: another attempt follows). */
export interface StateEventData {
  state: WireState;
  attempt?: number;
  worker?: string;
  reason?: string;
  failure?: JobFailure | null;
  retry?: boolean;
}
/** A `stage` event: a verify stage started (`running`) or finished. */
export interface StageEventData {
  index: number;
  stage: string;
  status: "running" | StageStatus;
  duration_ms?: number;
}
/** An `output` event: a piece of the program's output (redacted). */
export interface OutputEventData {
  stage?: string | null;
  stream: "stdout" | "stderr";
  text: string;
}
/** The `end` event: the job reached its final state; nothing follows. */
export interface EndEventData {
  state: WireState;
  result?: unknown;
  note?: string;
}
/** One event of a job's live log; `id` is its sequence number. */
export type JobEvent =
  | { id: number; event: "state"; data: StateEventData }
  | { id: number; event: "stage"; data: StageEventData }
  | { id: number; event: "output"; data: OutputEventData }
  | { id: number; event: "end"; data: EndEventData };

/** The result of a `repo.clone` job. */
export interface CloneResult {
  workspace: string;
  commit: string;
  branch: string;
}
/** The result of a `repo.applyPatch` job. */
export interface ApplyPatchResult {
  workspace: string;
  commit: string;
  applied_files: string[];
  diff: { files: number; insertions: number; deletions: number };
  patch_id: string;
}

/** Filters of `list` and `listPage`. */
export interface ListOptions {
  /** An operator token: only this project's jobs. */
  project?: string;
  state?: WireState;
  /** Jobs per page (1..=500; the service's default is 50). */
  limit?: number;
  signal?: AbortSignal;
}

/** What every job a helper submits may carry. */
export interface JobOptions {
  /** The project (the token's). */
  project: string;
  /** An idempotency key: the same key names the same job when the call is made again. */
  idempotencyKey?: string;
  /** The job's time limit per attempt (`"90s"`, `"10m"`). */
  jobTimeout?: string;
  /** Names of secrets the job's programs get. */
  secrets?: string[];
  priority?: number;
  /** How long to wait for the job to end, in milliseconds (default: as long as it takes). */
  timeout?: number;
  signal?: AbortSignal;
}

/** A verify of a patch on a repository: `clone → applyPatch → verify`. */
export interface VerifyPatchOptions extends Omit<JobOptions, "idempotencyKey"> {
  /** The repository: a local path or a git URL the server reaches. */
  url: string;
  ref?: string;
  depth?: number;
  /** The patch (unified diff); none: the ref as it is. */
  patch?: string;
  /** The patch must change exactly these paths. */
  expectFiles?: string[];
  stages?: string[];
  categories?: string[];
  /** Each job's key is this with `/clone`, `/apply`, `/verify` appended: a chain run again resumes. */
  idempotencyKey?: string;
}

interface RequestOptions {
  body?: unknown;
  headers?: Record<string, string>;
  /** Safe to send again after a connection error or a 5xx. */
  idempotent: boolean;
  signal?: AbortSignal;
  /** The answer's body is read by the caller (a stream): the request timeout ends at the head. */
  stream?: boolean;
}

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });

/** An AbortController that also follows `parent`. */
function linked(parent?: AbortSignal): { controller: AbortController; unlink: () => void } {
  const controller = new AbortController();
  if (!parent) return { controller, unlink: () => {} };
  const onAbort = () => controller.abort(parent.reason);
  if (parent.aborted) onAbort();
  else parent.addEventListener("abort", onAbort, { once: true });
  return { controller, unlink: () => parent.removeEventListener("abort", onAbort) };
}

/** A client of cordon's job service. */
export class CordonClient {
  readonly baseUrl: string;
  private readonly token: string;
  private readonly fetcher: typeof fetch;
  private readonly maxRetries: number;
  private readonly retryDelay: number;
  private readonly maxRetryDelay: number;
  private readonly requestTimeout: number;
  private readonly streamIdleTimeout: number;
  private readonly onRetry: ClientOptions["onRetry"];

  constructor(options: ClientOptions) {
    if (!options.baseUrl) throw new CordonError("baseUrl is required");
    if (!options.token) throw new CordonError("token is required");
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.fetcher = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.maxRetries = options.maxRetries ?? 3;
    this.retryDelay = options.retryDelay ?? 250;
    this.maxRetryDelay = options.maxRetryDelay ?? 30_000;
    this.requestTimeout = options.requestTimeout ?? 30_000;
    this.streamIdleTimeout = options.streamIdleTimeout ?? 45_000;
    this.onRetry = options.onRetry;
  }

  /**
   * Submits a job. With an idempotency key (the option, or the request's
   * `idempotency_key`) the same call made again returns the same job, so it is retried after
   * a connection error too; without one, only after a 429 or 503 (nothing was queued).
   */
  async submit(job: JobRequest, options: { idempotencyKey?: string; signal?: AbortSignal } = {}): Promise<Job> {
    const body: JobRequest = options.idempotencyKey ? { ...job, idempotency_key: options.idempotencyKey } : job;
    return this.request<Job>("POST", "/v1/jobs", {
      body,
      idempotent: typeof body.idempotency_key === "string",
      signal: options.signal,
    });
  }

  /** The job, as it is now. */
  async get(id: string, options: { signal?: AbortSignal } = {}): Promise<Job> {
    return this.request<Job>("GET", `/v1/jobs/${encodeURIComponent(id)}`, { idempotent: true, signal: options.signal });
  }

  /** One page of jobs, newest first; pass its `next_cursor` as `cursor` for the next. */
  async listPage(options: ListOptions & { cursor?: string } = {}): Promise<JobList> {
    const query = new URLSearchParams();
    for (const key of ["project", "state", "limit", "cursor"] as const) {
      const value = options[key];
      if (value !== undefined) query.set(key, String(value));
    }
    const qs = query.toString();
    return this.request<JobList>("GET", `/v1/jobs${qs ? `?${qs}` : ""}`, { idempotent: true, signal: options.signal });
  }

  /** Every job that matches, newest first, page after page. */
  async *list(options: ListOptions = {}): AsyncGenerator<Job, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.listPage({ ...options, cursor });
      yield* page.jobs;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  /** Cancels the job (queued: at once; running: its process tree dies); returns it after. */
  async cancel(id: string, options: { signal?: AbortSignal } = {}): Promise<Job> {
    // Cancelling twice is cancelling once: safe to retry.
    return this.request<Job>("POST", `/v1/jobs/${encodeURIComponent(id)}/cancel`, {
      idempotent: true,
      signal: options.signal,
    });
  }

  /**
   * The job's live log from the start (or after event `after`) until its `end` event. A
   * dropped connection is resumed with `Last-Event-ID`: no event is lost or repeated.
   */
  async *logs(
    id: string,
    options: { after?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<JobEvent, void, undefined> {
    const path = `/v1/jobs/${encodeURIComponent(id)}/events`;
    let last = options.after ?? 0;
    let failures = 0;
    for (;;) {
      const headers: Record<string, string> = { accept: "text/event-stream" };
      if (last > 0) headers["last-event-id"] = String(last);
      const { res, controller, release } = await this.send("GET", path, {
        headers,
        idempotent: true,
        signal: options.signal,
        stream: true,
      });
      let dropped: unknown;
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      const parser = new SseParser();
      try {
        for (;;) {
          let timer: ReturnType<typeof setTimeout> | undefined;
          const idle = new Promise<never>((_, reject) => {
            timer = setTimeout(() => {
              const error = new CordonConnectionError(`no data for ${this.streamIdleTimeout} ms`);
              controller.abort(error);
              reject(error);
            }, this.streamIdleTimeout);
          });
          let chunk: ReadableStreamReadResult<string>;
          try {
            chunk = await Promise.race([reader.read(), idle]);
          } finally {
            clearTimeout(timer);
          }
          if (chunk.done) break;
          for (const message of parser.push(chunk.value)) {
            const seq = message.id === undefined ? last : Number(message.id);
            const event = { id: seq, event: message.event, data: JSON.parse(message.data) } as JobEvent;
            // The server resumes after `Last-Event-ID`; a repeat would be a bug: not passed on.
            if (event.event !== "end" && seq <= last) continue;
            last = seq;
            failures = 0;
            yield event;
            if (event.event === "end") return;
          }
        }
      } catch (error) {
        if (options.signal?.aborted) throw options.signal.reason;
        dropped = error;
      } finally {
        controller.abort();
        reader.cancel().catch(() => {});
        release();
      }
      // The stream ended without its `end` event: the connection dropped (or the server
      // stopped): resume after the last event.
      failures += 1;
      const error = new CordonConnectionError(`the live log of ${id} ended early`, { cause: dropped });
      if (failures > this.maxRetries) throw error;
      const delay = this.backoff(failures - 1);
      await this.onRetry?.({ method: "GET", path, attempt: failures, delay, error });
      await sleep(delay, options.signal);
    }
  }

  /**
   * Waits for the job to end (following its live log) and returns it. `timeout` is in
   * milliseconds; past it, {@link WaitTimeoutError}.
   */
  async wait(id: string, options: { timeout?: number; signal?: AbortSignal } = {}): Promise<Job> {
    const { controller, unlink } = linked(options.signal);
    let timedOut = false;
    const timer =
      options.timeout === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            controller.abort(new WaitTimeoutError(id, options.timeout!));
          }, options.timeout);
    try {
      const now = await this.get(id, { signal: controller.signal });
      if (FINAL_STATES.includes(now.state)) return now;
      for await (const event of this.logs(id, { signal: controller.signal })) {
        if (event.event === "end") break;
      }
      return await this.get(id, { signal: controller.signal });
    } catch (error) {
      if (timedOut) throw new WaitTimeoutError(id, options.timeout!);
      throw error;
    } finally {
      clearTimeout(timer);
      unlink();
    }
  }

  /** Submits a job and waits for it to end. */
  async run(job: JobRequest, options: { idempotencyKey?: string; timeout?: number; signal?: AbortSignal } = {}): Promise<Job> {
    const submitted = await this.submit(job, options);
    return this.wait(submitted.id, options);
  }

  /** A `repo.clone` job, waited for; throws {@link JobFailedError} unless it succeeded. */
  async clone(options: JobOptions & { url: string; ref?: string; depth?: number }): Promise<Job> {
    const inputs: Record<string, unknown> = { url: options.url };
    if (options.ref !== undefined) inputs.ref = options.ref;
    if (options.depth !== undefined) inputs.depth = options.depth;
    return this.succeeded(this.jobRequest("repo.clone", inputs, options), options);
  }

  /**
   * A `repo.applyPatch` job on the workspace of job `workspace` (a clone or an earlier
   * apply), waited for; throws {@link JobFailedError} unless it succeeded.
   */
  async applyPatch(options: JobOptions & { workspace: string; patch: string; expectFiles?: string[] }): Promise<Job> {
    const inputs: Record<string, unknown> = { workspace: { from_job: options.workspace }, patch: options.patch };
    if (options.expectFiles !== undefined) inputs.expect_files = options.expectFiles;
    return this.succeeded(this.jobRequest("repo.applyPatch", inputs, options), options);
  }

  /**
   * A `verify` job of the workspace of job `workspace`, waited for: its report, whether the
   * gate passed (`overall: "pass"`) or not. Throws {@link JobFailedError} when the job ended
   * without a report (cancelled, refused, an infrastructure failure).
   */
  async verify(
    options: JobOptions & { workspace: string; ref?: string; patch?: string; stages?: string[]; categories?: string[] },
  ): Promise<RunReport> {
    const inputs: Record<string, unknown> = { workspace: { from_job: options.workspace } };
    if (options.ref !== undefined) inputs.ref = options.ref;
    if (options.patch !== undefined) inputs.patch = options.patch;
    if (options.stages !== undefined) inputs.stages = options.stages;
    if (options.categories !== undefined) inputs.categories = options.categories;
    const job = await this.run(this.jobRequest("verify", inputs, options), options);
    return reportOf(job);
  }

  /**
   * The common chain: clone the repository, apply the patch, verify; returns the verify's
   * report (a failing gate is a report too, `overall: "fail"`, with its findings). Throws
   * {@link JobFailedError} when the clone or the apply fails.
   */
  async verifyPatch(options: VerifyPatchOptions): Promise<RunReport> {
    const { project, jobTimeout, secrets, priority, signal, idempotencyKey: key, timeout } = options;
    const deadline = timeout === undefined ? undefined : Date.now() + timeout;
    const step = (name: string): JobOptions => ({
      project,
      jobTimeout,
      secrets,
      priority,
      signal,
      idempotencyKey: key === undefined ? undefined : `${key}/${name}`,
      timeout: deadline === undefined ? undefined : Math.max(0, deadline - Date.now()),
    });
    let workspace = (await this.clone({ ...step("clone"), url: options.url, ref: options.ref, depth: options.depth })).id;
    if (options.patch !== undefined) {
      workspace = (
        await this.applyPatch({ ...step("apply"), workspace, patch: options.patch, expectFiles: options.expectFiles })
      ).id;
    }
    return this.verify({ ...step("verify"), workspace, stages: options.stages, categories: options.categories });
  }

  private jobRequest(type: JobRequest["type"], inputs: Record<string, unknown>, options: JobOptions): JobRequest {
    const job: Record<string, unknown> = { project: options.project, type, inputs };
    if (options.jobTimeout !== undefined) job.timeout = options.jobTimeout;
    if (options.secrets !== undefined) job.secrets = options.secrets;
    if (options.priority !== undefined) job.priority = options.priority;
    if (options.idempotencyKey !== undefined) job.idempotency_key = options.idempotencyKey;
    return job as unknown as JobRequest;
  }

  private async succeeded(job: JobRequest, options: JobOptions): Promise<Job> {
    const done = await this.run(job, options);
    if (done.state !== "succeeded") throw new JobFailedError(done);
    return done;
  }

  private backoff(attempt: number): number {
    const ceiling = Math.min(this.maxRetryDelay, this.retryDelay * 2 ** attempt);
    return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
  }

  /** A request whose answer is JSON. */
  private async request<T>(method: string, path: string, options: RequestOptions): Promise<T> {
    const { text } = await this.send(method, path, options);
    return JSON.parse(text) as T;
  }

  /**
   * One request, retried as far as is safe, until a 2xx answer (else the error is thrown).
   * Its body is read within the request timeout, except for a stream: then the caller gets
   * the answer with its body unread, and `release` to call when done with it.
   */
  private async send(
    method: string,
    path: string,
    options: RequestOptions,
  ): Promise<{ res: Response; text: string; controller: AbortController; release: () => void }> {
    for (let attempt = 0; ; attempt++) {
      const { controller, unlink } = linked(options.signal);
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        controller.abort(new CordonConnectionError(`${method} ${path}: no answer within ${this.requestTimeout} ms`));
      }, this.requestTimeout);
      let error: CordonError;
      let delay: number | undefined;
      let handedOver = false;
      try {
        const headers: Record<string, string> = {
          authorization: `Bearer ${this.token}`,
          accept: "application/json",
          ...options.headers,
        };
        if (options.body !== undefined) headers["content-type"] = "application/json";
        const res = await this.fetcher(this.baseUrl + path, {
          method,
          headers,
          body: options.body === undefined ? undefined : JSON.stringify(options.body),
          signal: controller.signal,
        });
        if (res.ok && options.stream) {
          handedOver = true;
          return { res, text: "", controller, release: unlink };
        }
        const text = await res.text();
        if (res.ok) return { res, text, controller, release: () => {} };
        const apiError = errorFromAnswer(res.status, res.headers, text);
        error = apiError;
        if (res.status === 429 || res.status === 503) {
          // Nothing was done: safe to send again, when the server says.
          delay = apiError.retryAfter !== undefined ? apiError.retryAfter * 1000 : this.backoff(attempt);
        } else if (options.idempotent && [500, 502, 504].includes(res.status)) {
          delay = this.backoff(attempt);
        }
      } catch (thrown) {
        if (options.signal?.aborted) throw options.signal.reason;
        error =
          thrown instanceof CordonError
            ? thrown
            : timedOut
              ? (controller.signal.reason as CordonError)
              : new CordonConnectionError(`${method} ${path}: ${(thrown as Error)?.message ?? thrown}`, {
                  cause: thrown,
                });
        if (options.idempotent) delay = this.backoff(attempt);
      } finally {
        clearTimeout(timer);
        if (!handedOver) unlink();
      }
      if (delay === undefined || attempt >= this.maxRetries || delay > this.maxRetryDelay) throw error;
      await this.onRetry?.({ method, path, attempt: attempt + 1, delay, error });
      await sleep(delay, options.signal);
    }
  }
}

/** The `cordon.run-report/v1` of a finished verify job; throws unless it has one. */
export function reportOf(job: Job): RunReport {
  const result = job.result as RunReport | null | undefined;
  if (!result || result.schema !== "cordon.run-report/v1") {
    throw new JobFailedError(job, `verify job ${job.id} ended ${job.state} without a report${job.failure ? `: ${job.failure.reason}` : ""}`);
  }
  return result;
}
