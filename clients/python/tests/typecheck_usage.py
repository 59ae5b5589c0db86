"""Checked (not run) by mypy --strict in test_package.py: the package's types say what the
service sends. An ``ignore`` below marks a mistake mypy must catch: were the types too
loose, the ignore would be unused, and --strict fails on that."""

from __future__ import annotations

from typing import List

from cordon_client import AsyncClient, Client, ConflictError, JobEvent, PolicyError
from cordon_client.types import Finding, JobDocument, JobRequest, RunReport, WireState


def usage(client: Client) -> List[str]:
    request: JobRequest = {"project": "web", "type": "verify", "inputs": {"workspace": {"from_job": "j-a"}}}
    job: JobDocument = client.submit(request, idempotency_key="k")
    state: WireState = job["state"]
    report: RunReport = client.verify_patch("web", "/src/web", patch="")
    findings: List[Finding] = [f for stage in report["stages"] for f in stage.get("findings", [])]
    places = [f"{f.get('file')}:{f.get('line')} {f['kind']} {f['message']}" for f in findings]
    for event in client.logs(job["id"]):
        e: JobEvent = event
        places.append(str(e.data.get("text")))
    try:
        client.cancel(job["id"])
    except PolicyError as refused:
        places.append(refused.rule or "")
    except ConflictError as conflict:
        places.append(conflict.existing_job_id or "")
    wrong: WireState = "done"  # type: ignore[assignment]
    bad: JobRequest = {"project": "web", "type": "run", "inputs": {}}  # type: ignore[misc, assignment]
    places.append(job["nope"])  # type: ignore[typeddict-item]
    return [*places, state, str(wrong), str(bad)]


async def async_usage(client: AsyncClient) -> RunReport:
    async for job in client.list(state="queued"):
        await client.cancel(job["id"])
    return await client.verify_patch("web", "/src/web")
