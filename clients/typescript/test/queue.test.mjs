// The queue alone: a real `cordon serve --no-workers` (jobs stay queued).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";

import { CordonClient, BusyError, WaitTimeoutError } from "../dist/index.js";
import { startServer, thrown } from "./support/server.mjs";

const POLICY = `
[projects.web]
allow = [["sh", "*"]]

[projects.full]
max_queued = 2
allow = [["sh", "*"]]
`;

let server;
let client;

before(async () => {
  server = await startServer(POLICY, { args: ["--no-workers"] });
  client = new CordonClient({ baseUrl: server.url, token: server.token("web") });
});

after(async () => {
  await server?.stop();
});

const run = (project, script) => ({ project, type: "run", inputs: { argv: ["sh", "-c", script] } });

test("list pages through 250 jobs, newest first, by cursor", async () => {
  const submitted = [];
  for (let i = 0; i < 250; i++) submitted.push((await client.submit(run("web", `echo ${i}`))).id);
  let pages = 0;
  const counting = new CordonClient({
    baseUrl: server.url,
    token: server.token("web"),
    fetch: (url, init) => {
      if (new URL(url).pathname === "/v1/jobs") pages += 1;
      return fetch(url, init);
    },
  });
  const listed = [];
  for await (const job of counting.list({ state: "queued", limit: 100 })) listed.push(job);
  assert.equal(pages, 3, "100 + 100 + 50");
  assert.equal(listed.length, 250);
  assert.deepEqual(new Set(listed.map((j) => j.id)), new Set(submitted));
  assert.deepEqual(
    listed.map((j) => j.id),
    [...submitted].reverse(),
    "newest first",
  );
  // A page by hand, and a filter that matches nothing.
  const page = await client.listPage({ limit: 7 });
  assert.equal(page.jobs.length, 7);
  assert.ok(page.next_cursor);
  const next = await client.listPage({ limit: 7, cursor: page.next_cursor });
  assert.deepEqual(next.jobs.map((j) => j.id), listed.slice(7, 14).map((j) => j.id));
  const none = [];
  for await (const job of client.list({ state: "succeeded" })) none.push(job);
  assert.deepEqual(none, []);
});

test("a full queue is a BusyError with retryAfter from Retry-After; retried, it goes through once there is room", async () => {
  const token = server.token("full");
  const noRetries = new CordonClient({ baseUrl: server.url, token, maxRetries: 0 });
  const queued = [];
  for (let i = 0; i < 2; i++) queued.push(await noRetries.submit(run("full", "true")));
  const error = await thrown(() => noRetries.submit(run("full", "true")));
  assert.ok(error instanceof BusyError, String(error));
  assert.equal(error.status, 429);
  assert.equal(error.code, "busy");
  assert.equal(error.retryAfter, 1);
  assert.match(error.document.message, /max_queued/);

  // With retries: the client waits what the server said; meanwhile a place frees.
  const retries = [];
  const patient = new CordonClient({
    baseUrl: server.url,
    token,
    onRetry: async (retry) => {
      retries.push(retry);
      if (retries.length === 1) await noRetries.cancel(queued[0].id);
    },
  });
  const job = await patient.submit(run("full", "true"), { idempotencyKey: "after-busy" });
  assert.equal(job.state, "queued");
  assert.equal(retries.length, 1);
  assert.ok(retries[0].error instanceof BusyError);
  assert.equal(retries[0].delay, 1000);
});

test("wait gives up after its timeout with WaitTimeoutError", async () => {
  const job = await client.submit(run("web", "true"));
  const started = Date.now();
  const error = await thrown(() => client.wait(job.id, { timeout: 300 }));
  assert.ok(error instanceof WaitTimeoutError, String(error));
  assert.equal(error.jobId, job.id);
  assert.ok(Date.now() - started < 5000);
  // A cancelled queued job ends at once: wait returns it.
  await client.cancel(job.id);
  assert.equal((await client.wait(job.id, { timeout: 5000 })).state, "cancelled");
});
