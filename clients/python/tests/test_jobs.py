"""Jobs that run: a real ``cordon serve`` with workers, jobs in the real sandbox; the sync
client, and the async one where its own code runs (the chain, the live log)."""

from __future__ import annotations

import asyncio
import calendar
import tempfile
import time
from pathlib import Path

import pytest

from cordon_client import (
    AsyncClient,
    BudgetError,
    Client,
    ConflictError,
    ForbiddenError,
    JobFailedError,
    PolicyError,
    UnauthorizedError,
)
from support import CuttingProxy, Server, make_repo

POLICY = """
workers = 4

[projects.web]
concurrency = 3
max_timeout = "120s"
allow = [["sh", "*"], ["node", "*"], ["git", "*"]]

[projects.tight]
max_timeout = "30s"
daily_budget = { wall = "1s" }
allow = [["sh", "*"]]
"""

# A node package whose test stage (node's test runner, TAP) fails when `add` multiplies.
REPO = {
    "package.json": '{"name":"demo","version":"1.0.0","main":"index.js"}\n',
    "index.js": "exports.add = (a, b) => a + b;\n",
    "test/add.test.js": """const test = require('node:test');
const assert = require('node:assert');
const { add } = require('..');

test('adds', () => {
  assert.strictEqual(add(2, 3), 5);
});

test('adds zero', () => {
  assert.strictEqual(add(2, 0), 2);
});
""",
    "cordon.toml": '[[stage]]\nname = "test"\ncategory = "test"\nrun = ["node", "--test"]\n',
}
PASSING_PATCH = "--- /dev/null\n+++ b/NOTES\n@@ -0,0 +1 @@\n+adds numbers\n"
FAILING_PATCH = """--- a/index.js
+++ b/index.js
@@ -1 +1 @@
-exports.add = (a, b) => a + b;
+exports.add = (a, b) => a * b;
"""


@pytest.fixture(scope="module")
def server():
    server = Server(POLICY)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def token(server):
    return server.token("web")


@pytest.fixture
def client(server, token):
    with Client(server.url, token) as client:
        yield client


@pytest.fixture(scope="module")
def repo():
    with tempfile.TemporaryDirectory() as parent:
        yield make_repo(Path(parent), REPO)


def run(project, script):
    return {"project": project, "type": "run", "inputs": {"argv": ["sh", "-c", script]}}


def test_verify_patch_passing_report_through_the_chain(client, repo):
    report = client.verify_patch("web", str(repo), ref="main", patch=PASSING_PATCH)
    assert report["schema"] == "cordon.run-report/v1"
    assert report["overall"] == "pass", report["stages"]
    stage = next(s for s in report["stages"] if s["name"] == "test")
    assert stage["status"] == "pass"
    assert stage.get("findings", []) == []
    types = [job["type"] for job in client.list_page(limit=3)["jobs"]]
    assert types == ["verify", "repo.applyPatch", "repo.clone"]


def test_verify_patch_failing_report_names_the_test_at_its_file_and_line(server, token, repo):
    async def main():
        async with AsyncClient(server.url, token) as client:
            report = await client.verify_patch(
                "web", str(repo), patch=FAILING_PATCH, expect_files=["index.js"], idempotency_key="failing-1"
            )
            again = await client.verify_patch(
                "web", str(repo), patch=FAILING_PATCH, expect_files=["index.js"], idempotency_key="failing-1"
            )
            return report, again

    report, again = asyncio.run(main())
    assert report["overall"] == "fail"
    stage = next(s for s in report["stages"] if s["name"] == "test")
    assert stage["status"] == "fail"
    finding = next((f for f in stage.get("findings", []) if f.get("test") == "adds"), None)
    assert finding is not None, stage.get("findings")
    assert finding["kind"] == "test"
    assert (finding.get("file"), finding.get("line")) == ("test/add.test.js", 6)
    assert "6 !== 5" in finding["message"]
    # The same chain again (same key): the same jobs, the same report.
    assert again["run_id"] == report["run_id"]


def test_a_chain_whose_apply_fails_raises_job_failed(client, repo):
    with pytest.raises(JobFailedError) as raised:
        client.verify_patch("web", str(repo), patch=FAILING_PATCH, expect_files=["README"])
    job = raised.value.job
    assert (job["type"], job["state"]) == ("repo.applyPatch", "failed")
    assert job["failure"]["category"] == "usage"


def test_a_running_job_is_cancelled(client):
    job = client.submit(run("web", "echo started; sleep 60"))
    events = []
    for event in client.logs(job["id"]):
        events.append(event)
        if event.event == "output":
            assert client.cancel(job["id"])["id"] == job["id"]
    assert events[-1].event == "end"
    assert events[-1].data["state"] == "cancelled"
    done = client.wait(job["id"], timeout=30)
    assert done["state"] == "cancelled"
    assert done["attempt"] == 1
    assert done["result"]["status"] == "cancelled"
    assert "".join(e.data["text"] for e in events if e.event == "output") == "started\n"


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_logs_resume_after_a_dropped_connection(server, token, client, flavour):
    proxy = CuttingProxy(server.url)
    retries = []
    try:
        script = "echo one; sleep 1; echo two; sleep 1; echo three"
        if flavour == "sync":
            with Client(proxy.url, token, retry_delay=0.01, on_retry=retries.append) as via:
                job = via.submit(run("web", script))
                proxy.cut_next_stream = True
                seen = list(via.logs(job["id"]))
        else:
            async def main():
                async with AsyncClient(proxy.url, token, retry_delay=0.01, on_retry=retries.append) as via:
                    job = await via.submit(run("web", script))
                    proxy.cut_next_stream = True
                    return job, [e async for e in via.logs(job["id"])]

            job, seen = asyncio.run(main())
        assert proxy.cuts == 1, "the first stream was cut"
        assert len(retries) == 1, "one reconnect"
        streams = [h for h in proxy.heads if f"/v1/jobs/{job['id']}/events" in h]
        assert len(streams) == 2, streams
        first_output = next(e for e in seen if e.event == "output")
        assert f"\r\nlast-event-id: {first_output.id}".lower() in streams[1].lower()
        # Everything, once, in order: the same as the whole log read again in one go.
        whole = list(client.logs(job["id"]))
        assert seen == whole
        ids = [e.id for e in seen]
        assert ids == sorted(set(ids))
        assert "".join(e.data["text"] for e in seen if e.event == "output") == "one\ntwo\nthree\n"
        assert (seen[-1].event, seen[-1].data["state"]) == ("end", "succeeded")
        assert list(client.logs(job["id"], after=ids[2])) == whole[3:]
    finally:
        proxy.stop()


def test_idempotent_resubmission_and_conflict(client):
    job = run("web", "echo once")
    first = client.submit(job, idempotency_key="resubmit-1")
    again = client.submit(job, idempotency_key="resubmit-1")
    assert again["id"] == first["id"]
    done = client.wait(first["id"])
    assert done["state"] == "succeeded"
    assert done["result"]["stdout"]["head"] == "once\n", "it ran once"
    assert [j["id"] for j in client.list() if j.get("idempotency_key") == "resubmit-1"] == [first["id"]]

    with pytest.raises(ConflictError) as raised:
        client.submit(run("web", "echo twice"), idempotency_key="resubmit-1")
    assert raised.value.status == 409
    assert raised.value.existing_job_id == first["id"]
    assert raised.value.document["schema"] == "cordon.api-error/v1"


def test_policy_refusal_missing_scope_and_bad_token(server, client):
    with pytest.raises(PolicyError) as raised:
        client.submit({"project": "web", "type": "run", "inputs": {"argv": ["python3", "-c", "1"]}})
    assert (raised.value.status, raised.value.code) == (403, "policy")
    assert raised.value.rule == "projects.web.allow"

    with Client(server.url, server.token("web", "read")) as reader:
        with pytest.raises(ForbiddenError) as scope:
            reader.submit(run("web", "true"))
    assert not isinstance(scope.value, PolicyError)
    assert scope.value.code == "forbidden"

    with Client(server.url, "cordon_not_a_token") as stranger:
        with pytest.raises(UnauthorizedError) as denied:
            stranger.get("j-aaaaaaaaaa")
    assert denied.value.status == 401


def test_a_spent_budget_is_a_budget_error_with_retry_after(server):
    def no_retry(info):
        raise AssertionError(f"retried: {info.error}")

    with Client(server.url, server.token("tight"), on_retry=no_retry) as tight:
        spent = tight.run(run("tight", "sleep 1.2"))
        assert spent["state"] == "succeeded"
        with pytest.raises(BudgetError) as raised:
            tight.submit(run("tight", "true"))
    error = raised.value
    assert error.status == 429
    today = time.gmtime()
    midnight = calendar.timegm((today.tm_year, today.tm_mon, today.tm_mday, 0, 0, 0)) + 86400
    assert error.resets_at.timestamp() == midnight
    assert abs(error.retry_after - (midnight - time.time())) < 5
