"""The synchronous client."""

from __future__ import annotations

import codecs
import time
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, cast
from urllib.parse import quote

from ._core import (
    FINAL_STATES,
    VERSION,
    JobEvent,
    LogCursor,
    OnRetry,
    RetryInfo,
    SseParser,
    backoff,
    job_request,
    list_query,
    optional,
    report_of,
    step_key,
    succeeded,
)
from ._errors import CordonConnectionError, CordonError, WaitTimeoutError, error_from_answer
from .types import JobDocument, JobList, JobRequest, RunReport

if TYPE_CHECKING:
    import httpx


class _Deadline(Exception):
    pass


class Client:
    """A client of cordon's job service. Times are in seconds.

    Only what is safe is retried (``max_retries``; backoff from ``retry_delay``, doubling,
    with jitter): a 429 or 503 after its ``Retry-After`` (unless that is longer than
    ``max_retry_delay``: a spent daily budget is raised at once), GETs and cancels after a
    connection error or a 500/502/504, a submit only when it has an idempotency key. A live
    log reconnects after a dropped connection or ``stream_idle_timeout`` of silence.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        max_retries: int = 3,
        retry_delay: float = 0.25,
        max_retry_delay: float = 30.0,
        request_timeout: float = 30.0,
        stream_idle_timeout: float = 45.0,
        on_retry: Optional[OnRetry] = None,
        http_client: Optional[httpx.Client] = None,
    ) -> None:
        import httpx  # here, not at import: importing cordon_client stays cheap

        if not base_url or not token:
            raise CordonError("base_url and token are required")
        self._httpx = httpx
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.max_retries = max_retries
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.request_timeout = request_timeout
        self.stream_idle_timeout = stream_idle_timeout
        self.on_retry = on_retry
        self._own_http = http_client is None
        self._http = http_client or httpx.Client()

    def close(self) -> None:
        if self._own_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the calls ------------------------------------------------------------------------

    def submit(self, job: JobRequest, *, idempotency_key: Optional[str] = None) -> JobDocument:
        """Submits a job. With an idempotency key (the argument, or the request's
        ``idempotency_key``) the same call made again returns the same job, so it is retried
        after a connection error too; without one, only after a 429 or 503."""
        body: Dict[str, Any] = dict(job)
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        idempotent = isinstance(body.get("idempotency_key"), str)
        return cast(JobDocument, self._json("POST", "/v1/jobs", body=body, idempotent=idempotent))

    def get(self, job_id: str) -> JobDocument:
        """The job, as it is now."""
        return cast(JobDocument, self._json("GET", f"/v1/jobs/{quote(job_id, safe='')}", idempotent=True))

    def list_page(
        self,
        *,
        project: Optional[str] = None,
        state: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> JobList:
        """One page of jobs, newest first; pass its ``next_cursor`` as ``cursor``."""
        params = list_query(project, state, limit, cursor)
        return cast(JobList, self._json("GET", "/v1/jobs", params=params, idempotent=True))

    def list(
        self, *, project: Optional[str] = None, state: Optional[str] = None, limit: Optional[int] = None
    ) -> Iterator[JobDocument]:
        """Every matching job, newest first, page after page (``limit`` per page)."""
        cursor: Optional[str] = None
        while True:
            page = self.list_page(project=project, state=state, limit=limit, cursor=cursor)
            yield from page["jobs"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def cancel(self, job_id: str) -> JobDocument:
        """Cancels the job (queued: at once; running: its process tree dies)."""
        # Cancelling twice is cancelling once: safe to retry.
        return cast(JobDocument, self._json("POST", f"/v1/jobs/{quote(job_id, safe='')}/cancel", idempotent=True))

    def logs(self, job_id: str, *, after: Optional[int] = None) -> Iterator[JobEvent]:
        """The job's live log from the start (or after event ``after``) until its ``end``
        event. A dropped connection is resumed with ``Last-Event-ID``: no event is lost or
        repeated."""
        return self._follow(job_id, after, None)

    def wait(self, job_id: str, *, timeout: Optional[float] = None) -> JobDocument:
        """Waits for the job to end (following its live log) and returns it; past
        ``timeout`` seconds, :class:`WaitTimeoutError`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        job = self.get(job_id)
        if job["state"] in FINAL_STATES:
            return job
        try:
            for _ in self._follow(job_id, None, deadline):
                pass
        except _Deadline:
            raise WaitTimeoutError(job_id, timeout or 0.0) from None
        return self.get(job_id)

    def run(
        self, job: JobRequest, *, idempotency_key: Optional[str] = None, timeout: Optional[float] = None
    ) -> JobDocument:
        """Submits a job and waits for it to end."""
        return self.wait(self.submit(job, idempotency_key=idempotency_key)["id"], timeout=timeout)

    # --- the chain ------------------------------------------------------------------------

    def clone(
        self,
        project: str,
        url: str,
        *,
        ref: Optional[str] = None,
        depth: Optional[int] = None,
        idempotency_key: Optional[str] = None,
        job_timeout: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> JobDocument:
        """A ``repo.clone`` job, waited for; :class:`JobFailedError` unless it succeeded."""
        inputs = {"url": url, **optional(ref=ref, depth=depth)}
        job = job_request("repo.clone", inputs, project, idempotency_key, job_timeout)
        return succeeded(self.run(job, timeout=timeout))

    def apply_patch(
        self,
        project: str,
        workspace: str,
        patch: str,
        *,
        expect_files: Optional[List[str]] = None,
        idempotency_key: Optional[str] = None,
        job_timeout: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> JobDocument:
        """A ``repo.applyPatch`` job on the workspace of job ``workspace`` (a clone or an
        earlier apply), waited for; :class:`JobFailedError` unless it succeeded."""
        inputs = {"workspace": {"from_job": workspace}, "patch": patch, **optional(expect_files=expect_files)}
        job = job_request("repo.applyPatch", inputs, project, idempotency_key, job_timeout)
        return succeeded(self.run(job, timeout=timeout))

    def verify(
        self,
        project: str,
        workspace: str,
        *,
        ref: Optional[str] = None,
        patch: Optional[str] = None,
        stages: Optional[List[str]] = None,
        categories: Optional[List[str]] = None,
        idempotency_key: Optional[str] = None,
        job_timeout: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> RunReport:
        """A ``verify`` job of the workspace of job ``workspace``, waited for: its report,
        whether the gate passed (``overall == "pass"``) or not. :class:`JobFailedError` when
        the job ended without a report (cancelled, an infrastructure failure)."""
        inputs = {
            "workspace": {"from_job": workspace},
            **optional(ref=ref, patch=patch, stages=stages, categories=categories),
        }
        job = job_request("verify", inputs, project, idempotency_key, job_timeout)
        return report_of(self.run(job, timeout=timeout))

    def verify_patch(
        self,
        project: str,
        url: str,
        *,
        patch: Optional[str] = None,
        ref: Optional[str] = None,
        depth: Optional[int] = None,
        expect_files: Optional[List[str]] = None,
        stages: Optional[List[str]] = None,
        categories: Optional[List[str]] = None,
        idempotency_key: Optional[str] = None,
        job_timeout: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> RunReport:
        """The common chain: clone the repository, apply the patch, verify; returns the
        verify's report (a failing gate is a report too, ``overall == "fail"``, with its
        findings). :class:`JobFailedError` when the clone or the apply fails. Each job's key
        is ``idempotency_key`` with ``/clone``, ``/apply``, ``/verify``: a chain run again
        resumes."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def left() -> Optional[float]:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        key = idempotency_key
        workspace = self.clone(
            project, url, ref=ref, depth=depth, idempotency_key=step_key(key, "clone"),
            job_timeout=job_timeout, timeout=left(),
        )["id"]
        if patch is not None:
            workspace = self.apply_patch(
                project, workspace, patch, expect_files=expect_files,
                idempotency_key=step_key(key, "apply"), job_timeout=job_timeout, timeout=left(),
            )["id"]
        return self.verify(
            project, workspace, stages=stages, categories=categories,
            idempotency_key=step_key(key, "verify"), job_timeout=job_timeout, timeout=left(),
        )

    # --- the wire -------------------------------------------------------------------------

    def _headers(self, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        headers = {
            "authorization": f"Bearer {self._token}",
            "accept": "application/json",
            "user-agent": f"cordon-client-python/{VERSION}",
        }
        headers.update(extra or {})
        return headers

    def _retrying(self, info: RetryInfo) -> None:
        if self.on_retry is not None:
            self.on_retry(info)

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._send(method, path, **kwargs).json()

    def _send(
        self,
        method: str,
        path: str,
        *,
        idempotent: bool,
        body: Any = None,
        params: Any = None,
        headers: Optional[Dict[str, str]] = None,
        stream: bool = False,
        read_timeout: Optional[float] = None,
    ) -> httpx.Response:
        """One request, retried as far as is safe, until a 2xx answer (else the error is
        raised). A stream's answer comes back unread: the caller closes it."""
        httpx = self._httpx
        timeout = httpx.Timeout(self.request_timeout, read=read_timeout or self.request_timeout)
        attempt = 0
        while True:
            delay: Optional[float] = None
            try:
                request = self._http.build_request(
                    method, self.base_url + path, json=body, params=params,
                    headers=self._headers(headers), timeout=timeout,
                )
                res = self._http.send(request, stream=stream)
                if res.is_success:
                    return res
                try:
                    content = res.read()
                finally:
                    res.close()
                api_error = error_from_answer(res.status_code, res.headers, content)
                error: CordonError = api_error
                if res.status_code in (429, 503):
                    # Nothing was done: safe to send again, when the server says.
                    delay = api_error.retry_after
                    if delay is None:
                        delay = backoff(attempt, self.retry_delay, self.max_retry_delay)
                elif idempotent and res.status_code in (500, 502, 504):
                    delay = backoff(attempt, self.retry_delay, self.max_retry_delay)
            except httpx.TransportError as exc:
                error = CordonConnectionError(f"{method} {path}: {exc!r}")
                error.__cause__ = exc
                if idempotent:
                    delay = backoff(attempt, self.retry_delay, self.max_retry_delay)
            if delay is None or attempt >= self.max_retries or delay > self.max_retry_delay:
                raise error
            attempt += 1
            self._retrying(RetryInfo(method, path, attempt, delay, error))
            time.sleep(delay)

    def _follow(self, job_id: str, after: Optional[int], deadline: Optional[float]) -> Iterator[JobEvent]:
        httpx = self._httpx
        path = f"/v1/jobs/{quote(job_id, safe='')}/events"
        cursor = LogCursor(after)
        while True:
            read_timeout = self.stream_idle_timeout
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _Deadline()
                read_timeout = min(read_timeout, left)
            res = self._send(
                "GET", path, headers=cursor.headers(), idempotent=True, stream=True, read_timeout=read_timeout
            )
            dropped: Optional[BaseException] = None
            try:
                parser = SseParser()
                decoder = codecs.getincrementaldecoder("utf-8")("replace")
                for chunk in res.iter_bytes():
                    for event in cursor.events(parser.push(decoder.decode(chunk))):
                        yield event
                    if cursor.ended:
                        return
            except httpx.TransportError as exc:
                dropped = exc
            finally:
                res.close()
            # The stream ended without its `end` event: the connection dropped (or the server
            # stopped): resume after the last event.
            if deadline is not None and time.monotonic() >= deadline:
                raise _Deadline()
            cursor.failures += 1
            error = CordonConnectionError(f"the live log of {job_id} ended early: {dropped!r}")
            if cursor.failures > self.max_retries:
                raise error from dropped
            delay = backoff(cursor.failures - 1, self.retry_delay, self.max_retry_delay)
            self._retrying(RetryInfo("GET", path, cursor.failures, delay, error))
            time.sleep(delay)
