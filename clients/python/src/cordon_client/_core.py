"""What the sync and the async client share: the live log's framing, the retry rules, the
chain's job requests."""

from __future__ import annotations

import json
import random
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Union

from ._errors import CordonError, JobFailedError
from .types import JobDocument, JobRequest, RunReport

VERSION = "0.1.0"

#: The states in which a job stays.
FINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "interrupted"})


class JobEvent(NamedTuple):
    """One event of a job's live log: ``state``, ``stage``, ``output`` or ``end``; ``id`` is
    its sequence number (what ``logs(after=...)`` takes)."""

    id: int
    event: str
    data: Dict[str, Any]


class RetryInfo(NamedTuple):
    """What ``on_retry`` is told before a retry."""

    method: str
    path: str
    #: 1 for the first retry.
    attempt: int
    #: Seconds the client waits before it.
    delay: float
    #: What went wrong: an error answer or a connection error.
    error: CordonError


OnRetry = Callable[[RetryInfo], Any]


class SseMessage(NamedTuple):
    id: Optional[str]
    event: str
    data: str


class SseParser:
    """An incremental parser of ``text/event-stream`` (the WHATWG framing: ``\\n``,
    ``\\r\\n`` or ``\\r`` line ends, ``:`` comments, ``data`` lines joined, a blank line ends
    an event). Feed it text as it arrives; it returns the events completed so far."""

    def __init__(self) -> None:
        self._buffer = ""
        self._data: List[str] = []
        self._event = ""
        self._id: Optional[str] = None
        self._started = False

    def push(self, text: str) -> List[SseMessage]:
        if not self._started and text:
            self._started = True
            if text.startswith("\ufeff"):
                text = text[1:]
        buffer = self._buffer + text
        out: List[SseMessage] = []
        start = 0
        n = len(buffer)
        while True:
            i = start
            end = -1
            while i < n:
                c = buffer[i]
                if c == "\n":
                    end, nxt = i, i + 1
                    break
                if c == "\r":
                    if i + 1 == n:  # maybe the first half of "\r\n": wait for more
                        break
                    end, nxt = i, (i + 2 if buffer[i + 1] == "\n" else i + 1)
                    break
                i += 1
            if end < 0:
                break
            self._line(buffer[start:end], out)
            start = nxt
        self._buffer = buffer[start:]
        return out

    def _line(self, line: str, out: List[SseMessage]) -> None:
        if line == "":
            if self._data:
                out.append(SseMessage(self._id, self._event or "message", "\n".join(self._data)))
            self._data, self._event, self._id = [], "", None
            return
        if line.startswith(":"):
            return
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value


class LogCursor:
    """Where a live log stands: turns messages into events, passes on each once."""

    def __init__(self, after: Optional[int]) -> None:
        self.last = after or 0
        self.failures = 0
        self.ended = False

    def headers(self) -> Dict[str, str]:
        headers = {"accept": "text/event-stream"}
        if self.last > 0:
            headers["last-event-id"] = str(self.last)
        return headers

    def events(self, messages: List[SseMessage]) -> List[JobEvent]:
        out = []
        for message in messages:
            if self.ended:
                break
            seq = self.last if message.id is None else int(message.id)
            # The server resumes after Last-Event-ID; a repeat would be a bug: not passed on.
            if message.event != "end" and seq <= self.last:
                continue
            self.last = seq
            self.failures = 0
            out.append(JobEvent(seq, message.event, json.loads(message.data)))
            self.ended = message.event == "end"
        return out


def backoff(attempt: int, base: float, ceiling: float) -> float:
    """Exponential backoff with jitter: between half and all of base * 2**attempt."""
    top = min(ceiling, base * 2.0**attempt)
    return top / 2 + random.random() * top / 2


def job_request(
    job_type: str,
    inputs: Dict[str, Any],
    project: str,
    idempotency_key: Optional[str] = None,
    job_timeout: Optional[str] = None,
    secrets: Optional[List[str]] = None,
    priority: Optional[int] = None,
) -> JobRequest:
    job: Dict[str, Any] = {"project": project, "type": job_type, "inputs": inputs}
    if job_timeout is not None:
        job["timeout"] = job_timeout
    if secrets is not None:
        job["secrets"] = secrets
    if priority is not None:
        job["priority"] = priority
    if idempotency_key is not None:
        job["idempotency_key"] = idempotency_key
    return job  # type: ignore[return-value]


def optional(**values: Any) -> Dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def step_key(key: Optional[str], step: str) -> Optional[str]:
    return None if key is None else f"{key}/{step}"


def report_of(job: JobDocument) -> RunReport:
    """The ``cordon.run-report/v1`` of a finished verify job; raises unless it has one."""
    result = job.get("result")
    if not isinstance(result, dict) or result.get("schema") != "cordon.run-report/v1":
        failure = job.get("failure")
        why = f": {failure['reason']}" if failure else ""
        raise JobFailedError(job, f"verify job {job['id']} ended {job['state']} without a report{why}")
    return result  # type: ignore[return-value]


def succeeded(job: JobDocument) -> JobDocument:
    if job["state"] != "succeeded":
        raise JobFailedError(job)
    return job


Query = Dict[str, Union[str, int]]


def list_query(
    project: Optional[str], state: Optional[str], limit: Optional[int], cursor: Optional[str]
) -> Query:
    return optional(project=project, state=state, limit=limit, cursor=cursor)
