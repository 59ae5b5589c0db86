"""The queue alone: a real ``cordon serve --no-workers`` (jobs stay queued)."""

from __future__ import annotations

import asyncio
import time

import pytest

from cordon_client import AsyncClient, BusyError, Client, WaitTimeoutError
from support import Server

POLICY = """
[projects.web]
allow = [["sh", "*"]]

[projects.full]
max_queued = 2
allow = [["sh", "*"]]
"""


@pytest.fixture(scope="module")
def server():
    server = Server(POLICY, ["--no-workers"])
    yield server
    server.stop()


def run(project, script):
    return {"project": project, "type": "run", "inputs": {"argv": ["sh", "-c", script]}}


def test_list_pages_through_250_jobs(server):
    token = server.token("web")
    with Client(server.url, token) as client:
        submitted = [client.submit(run("web", f"echo {i}"))["id"] for i in range(250)]
        pages = []
        cursor = None
        while True:
            page = client.list_page(state="queued", limit=100, cursor=cursor)
            pages.append(len(page["jobs"]))
            cursor = page.get("next_cursor")
            if not cursor:
                break
        assert pages == [100, 100, 50]
        listed = [job["id"] for job in client.list(state="queued", limit=100)]
        assert listed == submitted[::-1], "all of them, newest first"
        assert list(client.list(state="succeeded")) == []

    async def main():
        async with AsyncClient(server.url, token) as client:
            return [job["id"] async for job in client.list(limit=64)]

    assert asyncio.run(main()) == submitted[::-1]


def test_a_full_queue_is_busy_with_retry_after_and_a_retry_goes_through(server):
    token = server.token("full")
    with Client(server.url, token, max_retries=0) as impatient:
        queued = [impatient.submit(run("full", "true")) for _ in range(2)]
        with pytest.raises(BusyError) as raised:
            impatient.submit(run("full", "true"))
        error = raised.value
        assert (error.status, error.code, error.retry_after) == (429, "busy", 1.0)
        assert "max_queued" in error.document["message"]

        # With retries: the client waits what the server said; meanwhile a place frees.
        retries = []

        def on_retry(info):
            retries.append(info)
            if len(retries) == 1:
                impatient.cancel(queued[0]["id"])

        with Client(server.url, token, on_retry=on_retry) as patient:
            job = patient.submit(run("full", "true"), idempotency_key="after-busy")
        assert job["state"] == "queued"
        assert len(retries) == 1
        assert isinstance(retries[0].error, BusyError)
        assert retries[0].delay == 1.0


def test_async_busy_is_retried_the_same_way(server):
    token = server.token("full")

    async def main():
        async with AsyncClient(server.url, token, max_retries=0) as impatient:
            # The queue holds two (the earlier test left it full again).
            queued = [j async for j in impatient.list(state="queued")]
            while len(queued) < 2:
                queued.append(await impatient.submit(run("full", "true")))
            with pytest.raises(BusyError):
                await impatient.submit(run("full", "true"))
            retries = []

            async def on_retry(info):
                retries.append(info)
                await impatient.cancel(queued[0]["id"])

            async with AsyncClient(server.url, token, on_retry=on_retry) as patient:
                job = await patient.submit(run("full", "true"))
            return job, retries

    job, retries = asyncio.run(main())
    assert job["state"] == "queued"
    assert [r.delay for r in retries] == [1.0]


def test_wait_gives_up_after_its_timeout(server):
    token = server.token("web")
    with Client(server.url, token) as client:
        job = client.submit(run("web", "true"))
        started = time.monotonic()
        with pytest.raises(WaitTimeoutError) as raised:
            client.wait(job["id"], timeout=0.3)
        assert raised.value.job_id == job["id"]
        assert time.monotonic() - started < 5
        client.cancel(job["id"])
        assert client.wait(job["id"], timeout=5)["state"] == "cancelled"

    async def main():
        async with AsyncClient(server.url, token) as client:
            job = await client.submit(run("web", "true"))
            with pytest.raises(WaitTimeoutError):
                await client.wait(job["id"], timeout=0.3)

    asyncio.run(main())
