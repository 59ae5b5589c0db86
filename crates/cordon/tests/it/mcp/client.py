"""An MCP client built on the official MCP Python SDK (`mcp` from PyPI), driving `cordon mcp`
over stdio or `/mcp` of `cordon serve` over Streamable HTTP through one scenario, and failing
(exit 1, the reason on stderr) at the first thing that is not as it must be.

    client.py stdio SCENARIO     # CORDON_BIN, CORDON_HOME, MCP_REPO, MCP_OUTSIDE, MCP_ARGS (JSON)
    client.py http SCENARIO      # MCP_URL, MCP_TOKEN, MCP_OTHER_TOKEN, MCP_REPO

The scenarios are the calls an agent makes: list the tools, run, verify a failing patch with
progress per stage, cancel a long run, and ask beyond the operator's bounds.
"""

import json
import os
import sys
import time

import anyio
from jsonschema import Draft202012Validator
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

CALC_PATCH = """--- a/demo/__init__.py
+++ b/demo/__init__.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a + b
+    return a * b
"""


def fail(message):
    print(f"client.py: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message, *context):
    if not condition:
        extra = "\n".join(json.dumps(c, indent=1, default=str) if not isinstance(c, str) else c for c in context)
        fail(f"{message}\n{extra}")


def structured(result):
    return result.structured_content or {}


def text(result):
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def host_processes(marker):
    """Host pids whose command line holds `marker` (a unique sleep duration)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in args and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


async def wait_for(what, predicate, limit=60.0):
    deadline = time.monotonic() + limit
    while True:
        value = await predicate()
        if value:
            return value
        check(time.monotonic() < deadline, f"{what}: not within {limit} s")
        await anyio.sleep(0.01)


def refused(result, bound, what):
    """A tool error carrying cordon.error/v1, of kind refused, naming `bound`."""
    doc = structured(result)
    check(result.is_error, f"{what}: not a tool error", text(result))
    check(doc.get("schema") == "cordon.error/v1", f"{what}: no cordon.error/v1 document", doc)
    check(doc.get("kind") == "refused" and doc.get("code") == 2, f"{what}: not refused (2)", doc)
    named = doc["message"] + "\n" + "\n".join(doc.get("hints", []))
    check(bound in named, f"{what}: the bound {bound!r} is not named", doc)


async def scenario_tools(session, env):
    listed = (await session.list_tools()).tools
    names = [t.name for t in listed]
    expected = env["tools"]
    check(names == expected, "the tools listed", names, expected)
    for tool in listed:
        for kind, schema in (("input", tool.input_schema), ("output", tool.output_schema)):
            check(schema is not None and schema.get("type") == "object", f"{tool.name}: {kind} schema", schema)
            Draft202012Validator.check_schema(schema)
        check(tool.description, f"{tool.name}: no description")
        check(tool.annotations is not None, f"{tool.name}: no annotations")
    by_name = {t.name: t for t in listed}
    run = by_name["run"]
    check(run.annotations.destructive_hint is True and run.annotations.read_only_hint is False, "run's annotations", run.annotations.model_dump())
    check("no_sandbox" not in run.input_schema["properties"], "no_sandbox exists without --allow-no-sandbox", run.input_schema)
    check("argv" in run.input_schema.get("required", []), "run's argv is not required", run.input_schema)
    logs = by_name["runs_logs"]
    check(logs.annotations.read_only_hint is True, "runs_logs is not read-only", logs.annotations.model_dump())
    if "workspace_remove" in by_name:
        remove = by_name["workspace_remove"].annotations
        check(remove.destructive_hint is True and remove.idempotent_hint is True, "workspace_remove's annotations", remove.model_dump())
    check('"cordon.run-result/v1"' in json.dumps(run.output_schema), "run's output schema", run.output_schema)
    check('"cordon.run-report/v1"' in json.dumps(by_name["verify"].output_schema), "verify's output schema")


async def scenario_run(session, env):
    notes = []

    async def progress(done, total, message):
        notes.append(message)

    result = await session.call_tool(
        "run",
        {"argv": ["sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"], "timeout": "60s"},
        progress_callback=progress,
    )
    doc = structured(result)
    check(not result.is_error, "run: a tool error", text(result))
    check(doc["schema"] == "cordon.run-result/v1", "run: not a run result", doc)
    check(doc["exit_code"] == 3 and doc["status"] == "fail", "run: exit code", doc)
    check("to-stdout" in doc["stdout"]["head"] + doc["stdout"]["tail"], "run: stdout", doc["stdout"])
    check("to-stderr" in doc["stderr"]["head"] + doc["stderr"]["tail"], "run: stderr", doc["stderr"])
    check(doc["sandbox"]["enabled"] is True, "run: not sandboxed", doc["sandbox"])
    summary = text(result)
    check("exit 3" in summary and "to-stdout" in summary, "run: the summary", summary)
    run_id = doc.get("run_id")
    if env["transport"] == "stdio":
        check(run_id and run_id.startswith("r-"), "run: no run id", doc)
        check(any(run_id in n for n in notes), "run: no progress naming the run", notes)
    else:
        run_id = next((n.split()[1] for n in notes if n.startswith("job j-")), None)
        check(run_id, "run: no progress naming the job", notes)
    shown = await session.call_tool("runs_show", {"id": run_id})
    check(not shown.is_error, "runs_show: a tool error", text(shown))
    logs = await session.call_tool("runs_logs", {"id": run_id})
    check("to-stdout" in structured(logs).get("text", ""), "runs_logs: the output", structured(logs))
    resources = (await session.list_resources()).resources
    uri = f"cordon://runs/{run_id}"
    check(any(str(r.uri) == uri for r in resources), "resources: the run is not listed", [str(r.uri) for r in resources])
    read = await session.read_resource(uri)
    check(run_id in read.contents[0].text, "resources: the run's document", read.contents[0].text[:400])
    # A program that does not start is a result too (saying why), not a protocol failure.
    missing = await session.call_tool("run", {"argv": ["no-such-program-xyz"]})
    doc = structured(missing)
    check(not missing.is_error and doc["status"] == "error", "run: a missing program", doc)
    check("not found" in doc["failure"]["reason"], "run: why it did not start", doc["failure"])


async def scenario_verify(session, env):
    notes = []

    async def progress(done, total, message):
        notes.append(message)

    args = {"repo": env["repo"], "patch": CALC_PATCH}
    if env["transport"] == "http":
        args = {"repo": env["repo"], "patch": CALC_PATCH}
    result = await session.call_tool("verify", args, progress_callback=progress)
    doc = structured(result)
    check(not result.is_error, "verify: a tool error", text(result))
    check(doc["schema"] == "cordon.run-report/v1", "verify: not a report", doc)
    check(doc["promotion"]["allowed"] is False, "verify: the gate did not block", doc["promotion"])
    check("pytest" in doc["promotion"]["blocking"], "verify: pytest does not block", doc["promotion"])
    stage = next(s for s in doc["stages"] if s["name"] == "pytest")
    finding = next((f for f in stage["findings"] if f.get("test") == "tests/test_demo.py::test_add"), None)
    check(finding is not None, "verify: no finding for the failing test", stage["findings"])
    check((finding["file"], finding["line"]) == ("tests/test_demo.py", 7), "verify: the finding's file:line", finding)
    check("assert" in finding["message"], "verify: the finding's message", finding)
    summary = text(result)
    check("blocked" in summary and "tests/test_demo.py:7" in summary, "verify: the summary", summary)
    for name in ("compile", "pytest"):
        started = [n for n in notes if f"`{name}`" in n and ("started" in n or "running" in n)]
        ended = [n for n in notes if f"`{name}`" in n and ("pass" in n or "fail" in n)]
        check(started and ended, f"verify: no progress for stage {name}", notes)


async def scenario_cancel(session, env):
    marker = f"991.{os.getpid()}{int(time.time() * 1000) % 100000}"
    notes = []

    async def progress(done, total, message):
        notes.append(message)

    script = f"sleep {marker} & sleep {marker} & wait"
    answered = []
    async with anyio.create_task_group() as group:

        async def call():
            answered.append(await session.call_tool("run", {"argv": ["sh", "-c", script], "timeout": "90s"}, progress_callback=progress))

        group.start_soon(call)

        async def running():
            check(not answered, "cancel: the long run answered", *(text(a) for a in answered))
            # Both the program's processes and the progress naming its run have arrived.
            return len(host_processes(marker)) == 2 and any(n.split()[0] in ("run", "job") for n in notes)

        await wait_for("the long run's processes", running)
        started = time.monotonic()
        group.cancel_scope.cancel()

    async def gone():
        return not host_processes(marker)

    await wait_for("the cancelled run's process tree gone", gone, limit=30.0)
    took = time.monotonic() - started
    grace = env["grace"]
    check(took <= grace, f"the process tree took {took:.2f} s to go, more than the grace period {grace} s")
    if env["transport"] == "stdio":
        run_id = next((n.split()[1] for n in notes if n.startswith("run r-")), None)
    else:
        run_id = next((n.split()[1] for n in notes if n.startswith("job j-")), None)
    check(run_id, "cancel: no progress naming the run", notes)

    async def ended():
        shown = await session.call_tool("runs_show", {"id": run_id})
        doc = structured(shown)
        state = doc.get("run", {}).get("status") if "run" in doc else doc.get("state")
        # `cancelling`: the cancel was asked and the job is still ending (not final yet).
        return doc if state not in (None, "running", "queued", "cancelling") else None

    doc = await wait_for("the cancelled run recorded", ended)
    if env["transport"] == "stdio":
        check(doc["run"]["status"] == "cancelled", "cancel: the run is not recorded cancelled", doc)
        check(doc["document"]["status"] == "cancelled", "cancel: the result does not say cancelled", doc["document"])
    else:
        check(doc["state"] == "cancelled", "cancel: the job is not cancelled", doc)
    print(json.dumps({"cancel_seconds": round(took, 3)}))


async def scenario_bounds(session, env):
    result = await session.call_tool("run", {"argv": ["true"], "network": "host"})
    refused(result, env["network_bound"], "a network beyond the bound")
    result = await session.call_tool("run", {"argv": ["true"], "timeout": "2h"})
    refused(result, env["timeout_bound"], "a timeout beyond the bound")
    if env["transport"] == "stdio":
        result = await session.call_tool("run", {"argv": ["true"], "memory": "64GiB"})
        refused(result, "--memory 512MiB", "memory beyond the bound")
        result = await session.call_tool("run", {"argv": ["true"], "cwd": env["outside"]})
        refused(result, "--repo", "a directory outside the repositories")
        result = await session.call_tool("verify", {"repo": env["outside"]})
        refused(result, "--repo", "a repository not allowed")
        result = await session.call_tool("workspace_create", {"repo": env["outside"]})
        refused(result, "--repo", "a workspace of a repository not allowed")
        result = await session.call_tool("run", {"argv": ["true"], "no_sandbox": True})
        refused(result, "--allow-no-sandbox", "a run without the sandbox")
    else:
        result = await session.call_tool("verify", {"repo": env["outside"]})
        check(result.is_error and structured(result).get("kind") == "refused", "a repository the policy refuses", structured(result))
    # A mistake is a tool error too, never a protocol failure.
    result = await session.call_tool("run", {"argv": ["true"], "bogus": 1})
    check(result.is_error and structured(result).get("kind") == "usage", "an unknown argument", structured(result))


async def scenario_isolation(session, env):
    """With another project's token: the first project's jobs cannot be seen or touched."""
    victim = env["victim_job"]
    shown = await session.call_tool("runs_show", {"id": victim})
    check(shown.is_error and structured(shown).get("kind") == "not_found", "runs_show of another project's job", structured(shown))
    logs = await session.call_tool("runs_logs", {"id": victim})
    check(logs.is_error and structured(logs).get("kind") == "not_found", "runs_logs of another project's job", structured(logs))
    resources = (await session.list_resources()).resources
    check(all(victim not in str(r.uri) for r in resources), "another project's job is listed", [str(r.uri) for r in resources])
    try:
        await session.read_resource(f"cordon://runs/{victim}")
        fail("another project's job was read as a resource")
    except Exception as error:  # the SDK raises the protocol error it got
        check("no such job" in str(error) or "not" in str(error), "reading another project's job", str(error))
    touched = await session.call_tool("run", {"argv": ["true"], "workspace": env["victim_workspace"]})
    check(touched.is_error, "a run in another project's workspace", structured(touched))


async def call_ok(session, name, arguments):
    result = await session.call_tool(name, arguments)
    check(not result.is_error, f"{name}: a tool error", text(result))
    return structured(result)


async def scenario_places(session, env):
    """Workspaces and sessions, as an agent uses them."""
    ws = await call_ok(session, "workspace_create", {})
    wid = ws["id"]
    check(ws["schema"] == "cordon.workspace/v1", "workspace_create: the record", ws)
    applied = await call_ok(session, "workspace_apply", {"id": wid, "patch": CALC_PATCH})
    check([f["path"] for f in applied["files"]] == ["demo/__init__.py"], "workspace_apply: the files", applied)
    diff = await call_ok(session, "workspace_diff", {"id": wid})
    check("+    return a * b" in diff["patch"] and not diff["truncated"], "workspace_diff: the patch", diff)
    ran = await call_ok(session, "run", {"argv": ["cat", "demo/__init__.py"], "workspace": wid})
    check("a * b" in ran["stdout"]["head"], "run in the workspace", ran)
    report = await call_ok(session, "verify", {"workspace": wid})
    check(report["promotion"]["allowed"] is False, "verify of the workspace's change", report["promotion"])
    await call_ok(session, "workspace_remove", {"id": wid})
    again = await session.call_tool("workspace_remove", {"id": wid})
    check(again.is_error and structured(again)["kind"] == "not_found", "a removed workspace", structured(again))

    sid = (await call_ok(session, "session_create", {}))["id"]
    change = (
        "printf 'def add(a, b):\\n    return a - b\\n' > demo/__init__.py && echo new > NEW && "
        "git add -A && git -c user.name=agent -c user.email=agent@example.org commit -qm change"
    )
    wrote = await call_ok(session, "session_exec", {"id": sid, "argv": ["sh", "-c", change]})
    check(wrote["exit_code"] == 0, "session_exec: the writer", wrote)
    reviewer = await call_ok(session, "session_exec", {"id": sid, "argv": ["sh", "-c", "echo x > y"], "read_only": True})
    check(reviewer["exit_code"] not in (0, None), "session_exec: a reviewer wrote", reviewer)
    check("Read-only file system" in reviewer["stderr"]["head"], "session_exec: the reviewer's refusal", reviewer["stderr"])
    sdiff = await call_ok(session, "session_diff", {"id": sid})
    check("+    return a - b" in sdiff["patch"] and "+new" in sdiff["patch"], "session_diff: the patch", sdiff)
    report = await call_ok(session, "verify", {"session": sid})
    check(report["promotion"]["allowed"] is False, "verify of the session's change", report["promotion"])
    forked = await call_ok(session, "session_fork", {"id": sid, "count": 2})
    forks = [s["id"] for s in forked["sessions"]]
    check(len(forks) == 2 and all(s["parent"] == sid for s in forked["sessions"]), "session_fork", forked)
    compared = await call_ok(session, "session_compare", {"ids": forks})
    check(compared["schema"] == "cordon.session-compare/v1" and compared["winner"] is None, "session_compare", compared)
    check([c["verdict"] for c in compared["candidates"]] == ["blocked", "blocked"], "session_compare: the verdicts", compared)
    for fork in forks:
        await call_ok(session, "session_remove", {"id": fork})
    shown = await call_ok(session, "session_show", {"id": sid})
    check(len(shown["runs"]) >= 2, "session_show: the runs", shown)
    pulled = await call_ok(session, "session_pull", {"id": sid})
    check(pulled["outcome"] == "merged" and pulled["commits"] == 1, "session_pull", pulled)
    ended = await call_ok(session, "session_remove", {"id": sid})
    check(ended["state"] == "ended", "session_remove", ended)


def job_of(result):
    """The job id an answer of the job service starts with (`job J: ...`)."""
    words = text(result).split()
    check(len(words) > 1 and words[0] == "job", "not a job's answer", text(result))
    return words[1].rstrip(":")


async def scenario_sessions(session, env):
    """Sessions through the job service: a session is its session_create job; a fork's
    sessions are FORK_JOB:I; compare ranks them and names the passing one."""
    ws = await call_ok(session, "workspace_create", {"repo": env["repo"]})
    created = await session.call_tool("session_create", {"workspace": ws["id"]})
    check(not created.is_error, "session_create: a tool error", text(created))
    sid = job_of(created)
    broken = "printf 'def add(a, b):\\n    return a - b\\n' > demo/__init__.py"
    wrote = await call_ok(session, "session_exec", {"id": sid, "argv": ["sh", "-c", broken]})
    check(wrote["exit_code"] == 0, "session_exec: the writer", wrote)
    result = await session.call_tool("session_fork", {"id": sid, "count": 2})
    check(not result.is_error, "session_fork: a tool error", text(result))
    forked, fork_job = structured(result), job_of(result)
    check(forked["schema"] == "cordon.session-fork/v1" and len(forked["sessions"]) == 2, "session_fork", forked)
    names = [f"{fork_job}:0", f"{fork_job}:1"]
    check(", ".join(names) in text(result), "session_fork: how to name the forks", text(result))
    fixed = "printf 'def add(a, b):\\n    return a + b\\n' > demo/__init__.py"
    wrote = await call_ok(session, "session_exec", {"id": names[1], "argv": ["sh", "-c", fixed]})
    check(wrote["exit_code"] == 0, "session_exec in a fork", wrote)
    seen = await call_ok(session, "session_exec", {"id": names[0], "argv": ["sh", "-c", "cat demo/__init__.py"]})
    check("a - b" in seen["stdout"]["head"], "a fork's write reached its sibling", seen)
    result = await session.call_tool("session_compare", {"ids": names})
    check(not result.is_error, "session_compare: a tool error", text(result))
    compared = structured(result)
    check(compared["schema"] == "cordon.session-compare/v1", "session_compare", compared)
    winner = forked["sessions"][1]["id"]
    check(compared["winner"] == winner, "session_compare: the winner", compared)
    check(f"1. {winner}: " in text(result) and f"winner: {winner}" in text(result), "session_compare: the summary", text(result))
    check([c["id"] for c in compared["candidates"]] == [winner, forked["sessions"][0]["id"]], "session_compare: the ranking", compared)
    bad = await session.call_tool("session_exec", {"id": f"{fork_job}:x", "argv": ["true"]})
    check(bad.is_error and "FORK_JOB:I" in text(bad), "a malformed fork name", text(bad))
    for name in names + [sid]:
        await call_ok(session, "session_remove", {"id": name})


SCENARIOS = {
    "sessions": scenario_sessions,
    "places": scenario_places,
    "tools": scenario_tools,
    "run": scenario_run,
    "verify": scenario_verify,
    "cancel": scenario_cancel,
    "bounds": scenario_bounds,
    "isolation": scenario_isolation,
}


async def main():
    transport, names = sys.argv[1], sys.argv[2].split(",")
    env = json.loads(os.environ["MCP_ENV"])
    env["transport"] = transport
    if transport == "stdio":
        params = StdioServerParameters(
            command=os.environ["CORDON_BIN"],
            args=["mcp", *env["args"]],
            env={k: v for k, v in os.environ.items()},
            cwd=env["repo"],
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                info = await session.initialize()
                check(info.server_info.name == "cordon", "the server's name", info.server_info.model_dump())
                for name in names:
                    await SCENARIOS[name](session, env)
    else:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = create_mcp_http_client(headers={"Authorization": f"Bearer {env['token']}"})
        async with client:
            async with streamable_http_client(env["url"], http_client=client) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    for name in names:
                        await SCENARIOS[name](session, env)
    print(json.dumps({"passed": names}))


anyio.run(main)
