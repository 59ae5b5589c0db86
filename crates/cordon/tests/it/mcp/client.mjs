// An MCP client built on the official TypeScript SDK (@modelcontextprotocol/sdk from npm,
// its package directory in MCP_SDK), driving `cordon mcp` over stdio: initialise, list the
// tools, run a program, a refusal beyond the operator's bounds. Exits 1 with the reason at the
// first thing that is not as it must be.
//
//   MCP_SDK=... CORDON_BIN=... CORDON_HOME=... MCP_REPO=... node client.mjs

import assert from "node:assert/strict";
import path from "node:path";
import { pathToFileURL } from "node:url";

const sdk = process.env.MCP_SDK;
const load = (file) => import(pathToFileURL(path.join(sdk, "dist/esm", file)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");

const transport = new StdioClientTransport({
  command: process.env.CORDON_BIN,
  args: ["mcp", "--repo", process.env.MCP_REPO, "--max-timeout", "1m"],
  env: { ...process.env },
  cwd: process.env.MCP_REPO,
  stderr: "inherit",
});
const client = new Client({ name: "cordon-test-typescript", version: "1.0.0" });
await client.connect(transport);
try {
  assert.equal(client.getServerVersion().name, "cordon");

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const name of ["run", "verify", "session_exec", "runs_logs"]) {
    assert.ok(names.includes(name), `${name} is listed: ${names}`);
  }
  const run = tools.find((t) => t.name === "run");
  assert.equal(run.inputSchema.type, "object");
  assert.equal(run.annotations.destructiveHint, true);

  // The SDK checks structured content against the tool's output schema.
  const progress = [];
  const ran = await client.callTool(
    { name: "run", arguments: { argv: ["sh", "-c", "echo from-typescript; exit 4"] } },
    undefined,
    { onprogress: (p) => progress.push(p.message) },
  );
  assert.notEqual(ran.isError, true, JSON.stringify(ran));
  assert.equal(ran.structuredContent.schema, "cordon.run-result/v1");
  assert.equal(ran.structuredContent.exit_code, 4);
  assert.match(ran.structuredContent.stdout.head, /from-typescript/);
  assert.match(ran.content[0].text, /exit 4/);
  assert.ok(progress.some((m) => m.startsWith("run r-")), `progress: ${progress}`);

  const refused = await client.callTool({
    name: "run",
    arguments: { argv: ["true"], timeout: "10m" },
  });
  assert.equal(refused.isError, true);
  assert.equal(refused.structuredContent.schema, "cordon.error/v1");
  assert.equal(refused.structuredContent.kind, "refused");
  assert.match(refused.structuredContent.message, /--max-timeout 1m/);
  console.log(JSON.stringify({ passed: "typescript" }));
} finally {
  await client.close();
}
