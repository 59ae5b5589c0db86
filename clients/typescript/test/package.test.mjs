// The package as it ships: generated types current, types that compile, packed within its
// size, installable from the packed file, its version cordon's.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync, rmSync, statSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

import { VERSION } from "../dist/index.js";
import { tempDir } from "./support/server.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const pkgDir = join(here, "..");
const root = join(pkgDir, "..", "..");
const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

test("the generated types are those of the committed schemas", () => {
  // Fails (exit 1, naming the file) when schema/ changed and the types were not regenerated.
  run("python3", [join(root, "scripts", "gen-client-types"), "--check", "--lang", "ts"], root);
});

test("the types compile against a consumer's code (test/typecheck.ts)", () => {
  run(process.execPath, [join(pkgDir, "node_modules", "typescript", "bin", "tsc"), "-p", join(here, "tsconfig.json")], pkgDir);
});

test("the version is cordon's", () => {
  const cargo = readFileSync(join(root, "Cargo.toml"), "utf8");
  const workspaceVersion = /\[workspace\.package\][^[]*?\nversion = "([^"]+)"/.exec(cargo)?.[1];
  assert.ok(workspaceVersion, "the workspace's version");
  const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
  assert.equal(pkg.version, workspaceVersion);
  assert.equal(VERSION, workspaceVersion);
  assert.deepEqual(pkg.dependencies ?? {}, {}, "no runtime dependencies");
});

test("npm pack makes a package of at most 30 KB that installs from the packed file", () => {
  const out = tempDir("cordon-client-pack-");
  try {
    const [packed] = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", out], pkgDir));
    const tarball = join(out, packed.filename);
    const size = statSync(tarball).size;
    assert.ok(size <= 30 * 1024, `${packed.filename} is ${size} bytes`);
    const files = packed.files.map((f) => f.path).sort();
    assert.ok(files.includes("dist/index.js") && files.includes("dist/index.d.ts"), files.join(" "));
    assert.ok(files.includes("README.md"), files.join(" "));
    assert.ok(!files.some((f) => f.startsWith("src/") || f.startsWith("test/")), files.join(" "));
    console.log(`# ${packed.filename}: ${size} bytes packed, ${packed.unpackedSize} unpacked`);

    const consumer = join(out, "consumer");
    run("mkdir", ["-p", consumer], out);
    writeFileSync(join(consumer, "package.json"), '{"name":"consumer","private":true,"type":"module"}\n');
    run("npm", ["install", "--offline", "--no-audit", "--no-fund", tarball], consumer);
    const probe =
      "import('@cordon/client').then((m) => console.log(JSON.stringify([m.VERSION, typeof m.CordonClient, typeof m.PolicyError])))";
    const seen = JSON.parse(run(process.execPath, ["--input-type=module", "-e", probe], consumer));
    assert.deepEqual(seen, [VERSION, "function", "function"]);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
