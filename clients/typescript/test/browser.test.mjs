// The package in a browser: Debian's chromium (headless, driven by playwright-core: both
// installed by scripts/test, named by CORDON_TEST_PLAYWRIGHT and CORDON_TEST_CHROMIUM or
// /usr/bin/chromium; the test fails without them) loads dist/ as ES modules from the
// server's origin and talks to a real `cordon serve --no-workers`: fetch, the SSE reader,
// the error classes.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, existsSync, rmSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

import { startServer, tempDir } from "./support/server.mjs";

const dist = join(dirname(fileURLToPath(import.meta.url)), "..", "dist");

const POLICY = `
[projects.web]
allow = [["sh", "*"]]
`;

let server;
let context;
let profile;

before(async () => {
  const playwright = process.env.CORDON_TEST_PLAYWRIGHT;
  if (!playwright) throw new Error("CORDON_TEST_PLAYWRIGHT is not set: scripts/test installs playwright-core");
  const executablePath = process.env.CORDON_TEST_CHROMIUM || "/usr/bin/chromium";
  if (!existsSync(executablePath)) throw new Error(`no chromium at ${executablePath}: scripts/test installs it`);
  const { chromium } = await import(pathToFileURL(join(playwright, "index.mjs")).href);
  server = await startServer(POLICY, { args: ["--no-workers"] });
  profile = tempDir("cordon-client-chromium-");
  context = await chromium.launchPersistentContext(join(profile, "profile"), {
    executablePath,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
});

after(async () => {
  await context?.close();
  await server?.stop();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

test("in chromium: submit, cancel, the live log to its end, wait, a policy refusal, list", async () => {
  const page = context.pages()[0] ?? (await context.newPage());
  const errors = [];
  page.on("pageerror", (error) => errors.push(error.message));
  // The page and the package come from the server's origin (served here, not by cordon),
  // so the API calls are same-origin, as for a dashboard of the platform's own.
  await page.route(`${server.url}/__client/**`, (route) => {
    const name = new URL(route.request().url()).pathname.slice("/__client/".length);
    if (name === "index.html") {
      return route.fulfill({
        contentType: "text/html",
        body: '<!doctype html><script type="module">import * as cordon from "./index.js"; window.cordon = cordon;</script>',
      });
    }
    if (!/^[a-z.]+\.js$/.test(name)) return route.fulfill({ status: 404, body: "" });
    return route.fulfill({ contentType: "text/javascript", body: readFileSync(join(dist, name)) });
  });
  await page.goto(`${server.url}/__client/index.html`);
  await page.waitForFunction(() => window.cordon !== undefined);
  const seen = await page.evaluate(async (token) => {
    const { CordonClient, PolicyError } = window.cordon;
    const client = new CordonClient({ baseUrl: location.origin, token });
    const job = { project: "web", type: "run", inputs: { argv: ["sh", "-c", "true"] } };
    const first = await client.submit(job, { idempotencyKey: "browser-1" });
    const again = await client.submit(job, { idempotencyKey: "browser-1" });
    await client.cancel(first.id);
    const events = [];
    for await (const event of client.logs(first.id)) events.push([event.id, event.event, event.data.state]);
    const done = await client.wait(first.id, { timeout: 5000 });
    let refused;
    try {
      await client.submit({ project: "web", type: "run", inputs: { argv: ["python3", "-c", "1"] } });
    } catch (error) {
      refused = { policy: error instanceof PolicyError, status: error.status, rule: error.rule };
    }
    const listed = [];
    for await (const listedJob of client.list({ limit: 1 })) listed.push(listedJob.id);
    return { ua: navigator.userAgent, same: first.id === again.id, id: first.id, events, state: done.state, refused, listed };
  }, server.token("web"));
  assert.match(seen.ua, /Chrome/);
  assert.ok(seen.same, "the idempotency key named the same job");
  assert.deepEqual(seen.events, [
    [1, "state", "queued"],
    [2, "state", "cancelled"],
    [3, "end", "cancelled"],
  ]);
  assert.equal(seen.state, "cancelled");
  assert.deepEqual(seen.refused, { policy: true, status: 403, rule: "projects.web.allow" });
  assert.deepEqual(seen.listed, [seen.id]);
  assert.deepEqual(errors, []);
});
