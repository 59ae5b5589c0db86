// A real `cordon serve` for the tests: the binary named by CORDON_BIN (required: the tests
// fail without it), a temp CORDON_HOME (its SQLite store), a loopback ephemeral port; its
// ready line ("cordon serve: listening on http://ADDR") is the synchronisation point.

import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, mkdirSync, rmSync, accessSync, constants } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { createInterface } from "node:readline";
import net from "node:net";

/** The cordon binary; throws (the test fails) when CORDON_BIN is unset or not executable. */
export function cordonBin() {
  const bin = process.env.CORDON_BIN;
  if (!bin) {
    throw new Error("CORDON_BIN is not set: point it at a built cordon binary (scripts/test does)");
  }
  accessSync(bin, constants.X_OK);
  return bin;
}

export function tempDir(prefix = "cordon-client-ts-") {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Starts `cordon serve` with `policy` (the text of a cordon-server.toml). */
export async function startServer(policy, { args = [] } = {}) {
  const bin = cordonBin();
  const dir = tempDir();
  const home = join(dir, "home");
  const config = join(dir, "cordon-server.toml");
  writeFileSync(config, policy);
  const child = spawn(
    bin,
    ["serve", "--config", config, "--listen", "127.0.0.1:0", "--retry-backoff", "50ms", ...args],
    { env: { ...process.env, CORDON_HOME: home }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const lines = createInterface({ input: child.stdout });
  const first = await Promise.race([
    new Promise((resolve) => lines.once("line", resolve)),
    exited.then((code) => {
      throw new Error(`cordon serve exited (${code}) before it listened: ${stderr}`);
    }),
  ]);
  const match = /^cordon serve: listening on (http:\/\/\S+)$/.exec(first.trim());
  if (!match) {
    child.kill("SIGKILL");
    throw new Error(`no ready line from cordon serve: ${JSON.stringify(first)} ${stderr}`);
  }
  return {
    url: match[1],
    home,
    dir,
    get stderr() {
      return stderr;
    },
    /** A token of `project` with `scopes` (`submit,read`), made by `cordon token create`. */
    token(project, scopes = "submit,read") {
      return execFileSync(bin, ["token", "create", "--project", project, "--scope", scopes], {
        env: { ...process.env, CORDON_HOME: home },
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      }).trim();
    },
    async stop() {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Runs git in `cwd` with an identity; returns stdout. */
export function git(cwd, ...args) {
  return execFileSync(
    "git",
    ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", ...args],
    { cwd, encoding: "utf8" },
  );
}

/** A repository `dir/repo` on branch main with `files` ({path: text}) in one commit. */
export function makeRepo(dir, files) {
  const repo = join(dir, "repo");
  mkdirSync(repo, { recursive: true });
  git(repo, "init", "-q", "-b", "main");
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(repo, path)), { recursive: true });
    writeFileSync(join(repo, path), text);
  }
  git(repo, "add", ".");
  git(repo, "commit", "-qm", "init");
  return repo;
}

/**
 * A loopback TCP proxy in front of `target` (`http://HOST:PORT`) that records each request's
 * head and, while `cutNextStream` is set, breaks the next live-log connection right after
 * it has passed on the first `output` event: a dropped connection, mid-stream.
 */
export async function startCuttingProxy(target) {
  const { hostname, port } = new URL(target);
  const state = { heads: [], cutNextStream: false, cuts: 0 };
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname);
    sockets.add(client).add(upstream);
    // The requests on this connection (keep-alive: one after another), parsed just enough to
    // find each head: bodies are skipped by their Content-Length.
    let pending = "";
    let bodyLeft = 0;
    let cutting = false;
    let seen = "";
    client.on("data", (chunk) => {
      pending += chunk.toString("latin1");
      for (;;) {
        if (bodyLeft > 0) {
          const skip = Math.min(bodyLeft, pending.length);
          pending = pending.slice(skip);
          bodyLeft -= skip;
          if (bodyLeft > 0) break;
        }
        const end = pending.indexOf("\r\n\r\n");
        if (end < 0) break;
        const head = pending.slice(0, end);
        pending = pending.slice(end + 4);
        state.heads.push(head);
        bodyLeft = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (/^GET \/v1\/jobs\/[^/ ]+\/events /.test(head) && state.cutNextStream) {
          state.cutNextStream = false;
          cutting = true;
          seen = "";
        }
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk) => {
      if (!cutting) return client.write(chunk);
      seen += chunk.toString("utf8");
      if (!seen.includes("event: output")) return client.write(chunk);
      cutting = false;
      state.cuts += 1;
      // Passed on, then the connection breaks (a reset, not a clean end).
      client.write(chunk, () => {
        client.resetAndDestroy();
        upstream.destroy();
      });
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", close).on("close", close);
    upstream.on("error", close).on("close", close);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    state,
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Runs `f`; returns what it threw (fails when it threw nothing). */
export async function thrown(f) {
  try {
    await f();
  } catch (error) {
    return error;
  }
  throw new Error("expected an error, none was thrown");
}
