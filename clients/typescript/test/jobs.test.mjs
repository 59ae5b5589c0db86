// Jobs that run: a real `cordon serve` with workers, jobs in the real sandbox.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";

import {
  CordonClient,
  BudgetError,
  ConflictError,
  ForbiddenError,
  PolicyError,
  UnauthorizedError,
  JobFailedError,
} from "../dist/index.js";
import { startServer, startCuttingProxy, makeRepo, tempDir, thrown } from "./support/server.mjs";

const POLICY = `
workers = 4

[projects.web]
concurrency = 3
max_timeout = "120s"
allow = [["sh", "*"], ["node", "*"], ["git", "*"]]

[projects.tight]
max_timeout = "30s"
daily_budget = { wall = "1s" }
allow = [["sh", "*"]]
`;

// A node package whose test stage (node's test runner, TAP) fails when `add` multiplies.
const REPO = {
  "package.json": '{"name":"demo","version":"1.0.0","main":"index.js"}\n',
  "index.js": "exports.add = (a, b) => a + b;\n",
  "test/add.test.js": `const test = require('node:test');
const assert = require('node:assert');
const { add } = require('..');

test('adds', () => {
  assert.strictEqual(add(2, 3), 5);
});

test('adds zero', () => {
  assert.strictEqual(add(2, 0), 2);
});
`,
  "cordon.toml": '[[stage]]\nname = "test"\ncategory = "test"\nrun = ["node", "--test"]\n',
};
const PASSING_PATCH = `--- /dev/null
+++ b/NOTES
@@ -0,0 +1 @@
+adds numbers
`;
const FAILING_PATCH = `--- a/index.js
+++ b/index.js
@@ -1 +1 @@
-exports.add = (a, b) => a + b;
+exports.add = (a, b) => a * b;
`;

let server;
let token;
let client;
let repo;
let repoDir;

before(async () => {
  server = await startServer(POLICY);
  token = server.token("web");
  client = new CordonClient({ baseUrl: server.url, token });
  repoDir = tempDir();
  repo = makeRepo(repoDir, REPO);
});

after(async () => {
  await server?.stop();
  if (repoDir) rmSync(repoDir, { recursive: true, force: true });
});

test("verifyPatch: a passing verify's report, through clone → applyPatch → verify", async () => {
  const report = await client.verifyPatch({ project: "web", url: repo, ref: "main", patch: PASSING_PATCH });
  assert.equal(report.schema, "cordon.run-report/v1");
  assert.equal(report.overall, "pass", JSON.stringify(report.stages));
  const stage = report.stages.find((s) => s.name === "test");
  assert.equal(stage.status, "pass");
  assert.deepEqual(stage.findings, []);
  // The chain left three jobs: a clone, an apply, a verify.
  const types = [];
  for await (const job of client.list({ limit: 10 })) types.push(job.type);
  assert.deepEqual(types.slice(0, 3), ["verify", "repo.applyPatch", "repo.clone"]);
});

test("verifyPatch: a failing verify's report names the failing test at its file:line", async () => {
  const report = await client.verifyPatch({
    project: "web",
    url: repo,
    patch: FAILING_PATCH,
    expectFiles: ["index.js"],
    idempotencyKey: "failing-1",
  });
  assert.equal(report.overall, "fail");
  const stage = report.stages.find((s) => s.name === "test");
  assert.equal(stage.status, "fail");
  const finding = stage.findings.find((f) => f.test === "adds");
  assert.ok(finding, JSON.stringify(stage.findings));
  assert.equal(finding.kind, "test");
  assert.equal(finding.file, "test/add.test.js");
  assert.equal(finding.line, 6);
  assert.match(finding.message, /6 !== 5/);
  // The same chain again (same key): the same jobs, the same verdict, nothing new run.
  const before = (await client.listPage({ limit: 500 })).jobs.length;
  const again = await client.verifyPatch({
    project: "web",
    url: repo,
    patch: FAILING_PATCH,
    expectFiles: ["index.js"],
    idempotencyKey: "failing-1",
  });
  assert.equal(again.run_id, report.run_id);
  assert.equal((await client.listPage({ limit: 500 })).jobs.length, before);
});

test("a chain whose apply fails throws JobFailedError with the job", async () => {
  const error = await thrown(() =>
    client.verifyPatch({ project: "web", url: repo, patch: FAILING_PATCH, expectFiles: ["README"] }),
  );
  assert.ok(error instanceof JobFailedError, String(error));
  assert.equal(error.job.type, "repo.applyPatch");
  assert.equal(error.job.state, "failed");
  assert.equal(error.job.failure.category, "usage");
});

test("a running job is cancelled: its log ends, wait returns it cancelled", async () => {
  const job = await client.submit({
    project: "web",
    type: "run",
    inputs: { argv: ["sh", "-c", "echo started; sleep 60"] },
  });
  const events = [];
  for await (const event of client.logs(job.id)) {
    events.push(event);
    if (event.event === "output") {
      const after = await client.cancel(job.id);
      assert.equal(after.id, job.id);
    }
  }
  assert.equal(events.at(-1).event, "end");
  assert.equal(events.at(-1).data.state, "cancelled");
  const done = await client.wait(job.id, { timeout: 30_000 });
  assert.equal(done.state, "cancelled");
  assert.equal(done.attempt, 1);
  assert.equal(done.result.status, "cancelled");
  assert.equal(
    events.filter((e) => e.event === "output").map((e) => e.data.text).join(""),
    "started\n",
  );
});

test("logs resume after a dropped connection: no event lost, none repeated", async () => {
  const proxy = await startCuttingProxy(server.url);
  try {
    const retries = [];
    const viaProxy = new CordonClient({
      baseUrl: proxy.url,
      token,
      retryDelay: 10,
      onRetry: (r) => retries.push(r),
    });
    const job = await viaProxy.submit({
      project: "web",
      type: "run",
      inputs: { argv: ["sh", "-c", "echo one; sleep 1; echo two; sleep 1; echo three"] },
    });
    proxy.state.cutNextStream = true;
    const seen = [];
    for await (const event of viaProxy.logs(job.id)) seen.push(event);
    assert.equal(proxy.state.cuts, 1, "the first stream was cut");
    assert.equal(retries.length, 1, "one reconnect");
    // The reconnect asked for what came after the last event received.
    const streams = proxy.state.heads.filter((h) => h.includes(`/v1/jobs/${job.id}/events`));
    assert.equal(streams.length, 2, streams.join("\n---\n"));
    const firstOutput = seen.findIndex((e) => e.event === "output");
    assert.match(streams[1], new RegExp(`\\r\\nlast-event-id: ${seen[firstOutput].id}\\r\\n`, "i"));
    // Everything, once, in order: the same as the whole log read again in one go.
    const whole = [];
    for await (const event of client.logs(job.id)) whole.push(event);
    assert.deepEqual(seen, whole);
    const ids = seen.map((e) => e.id);
    assert.deepEqual(ids, [...new Set(ids)].sort((a, b) => a - b));
    assert.equal(
      seen.filter((e) => e.event === "output").map((e) => e.data.text).join(""),
      "one\ntwo\nthree\n",
    );
    assert.equal(seen.at(-1).event, "end");
    assert.equal(seen.at(-1).data.state, "succeeded");
    // Resuming from an id yourself: what follows it.
    const tail = [];
    for await (const event of client.logs(job.id, { after: ids[2] })) tail.push(event);
    assert.deepEqual(tail, whole.slice(3));
  } finally {
    await proxy.stop();
  }
});

test("the same idempotency key returns the same job; another request under it is a conflict", async () => {
  const job = { project: "web", type: "run", inputs: { argv: ["sh", "-c", "echo once"] } };
  const first = await client.submit(job, { idempotencyKey: "resubmit-1" });
  const again = await client.submit(job, { idempotencyKey: "resubmit-1" });
  assert.equal(again.id, first.id);
  assert.equal(again.idempotency_key, "resubmit-1");
  const done = await client.wait(first.id);
  assert.equal(done.state, "succeeded");
  assert.equal(done.result.stdout.head, "once\n", "it ran once");
  let keyed = 0;
  for await (const listed of client.list()) if (listed.idempotency_key === "resubmit-1") keyed += 1;
  assert.equal(keyed, 1);

  const other = { ...job, inputs: { argv: ["sh", "-c", "echo twice"] } };
  const error = await thrown(() => client.submit(other, { idempotencyKey: "resubmit-1" }));
  assert.ok(error instanceof ConflictError, String(error));
  assert.equal(error.status, 409);
  assert.equal(error.existingJobId, first.id);
  assert.equal(error.document.schema, "cordon.api-error/v1");
});

test("a policy refusal is a PolicyError naming the rule; a missing scope and a bad token too", async () => {
  const error = await thrown(() =>
    client.submit({ project: "web", type: "run", inputs: { argv: ["python3", "-c", "1"] } }),
  );
  assert.ok(error instanceof PolicyError, String(error));
  assert.equal(error.status, 403);
  assert.equal(error.code, "policy");
  assert.equal(error.rule, "projects.web.allow");

  const reader = new CordonClient({ baseUrl: server.url, token: server.token("web", "read") });
  const scope = await thrown(() =>
    reader.submit({ project: "web", type: "run", inputs: { argv: ["sh", "-c", "true"] } }),
  );
  assert.ok(scope instanceof ForbiddenError && !(scope instanceof PolicyError), String(scope));
  assert.equal(scope.code, "forbidden");

  const stranger = new CordonClient({ baseUrl: server.url, token: "cordon_not_a_token" });
  const denied = await thrown(() => stranger.get("j-aaaaaaaaaa"));
  assert.ok(denied instanceof UnauthorizedError, String(denied));
  assert.equal(denied.status, 401);
});

test("a spent budget is a BudgetError with retryAfter until it resets, not retried", async () => {
  const tight = new CordonClient({
    baseUrl: server.url,
    token: server.token("tight"),
    onRetry: (r) => assert.fail(`retried: ${r.error}`),
  });
  const spent = await tight.run({ project: "tight", type: "run", inputs: { argv: ["sh", "-c", "sleep 1.2"] } });
  assert.equal(spent.state, "succeeded");
  const error = await thrown(() =>
    tight.submit({ project: "tight", type: "run", inputs: { argv: ["sh", "-c", "true"] } }),
  );
  assert.ok(error instanceof BudgetError, String(error));
  assert.equal(error.status, 429);
  const midnight = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate() + 1);
  assert.equal(error.resetsAt.getTime(), midnight);
  const expected = (midnight - Date.now()) / 1000;
  assert.ok(Math.abs(error.retryAfter - expected) < 5, `${error.retryAfter} vs ${expected}`);
});
