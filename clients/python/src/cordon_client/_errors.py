"""The errors this library raises."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Mapping, Optional

if TYPE_CHECKING:
    from datetime import datetime

    from .types import ApiError, JobDocument


class CordonError(Exception):
    """Every error this library raises."""


class CordonApiError(CordonError):
    """The service answered with an error: its status and, when it sent one, its
    ``cordon.api-error/v1`` document."""

    def __init__(
        self,
        status: int,
        document: Optional[ApiError],
        message: str,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(message)
        #: The HTTP status.
        self.status = status
        #: The service's error document, as it answered.
        self.document = document
        #: The document's stable code (``policy``, ``busy``, ...), or ``http_<status>``.
        self.code: str = document["error"] if document else f"http_{status}"
        #: Seconds to wait before trying again: the ``Retry-After`` header when the server
        #: sent one, else what the document says (``resets_at`` of a ``budget``); None when
        #: neither does.
        self.retry_after = retry_after


class BadRequestError(CordonApiError):
    """400: the request is malformed (the message names the field)."""


class UnauthorizedError(CordonApiError):
    """401: no valid bearer token."""


class ForbiddenError(CordonApiError):
    """403 ``forbidden``: the token lacks the scope."""


class PolicyError(CordonApiError):
    """403 ``policy``: the project's policy refuses the job; ``rule`` names the rule."""

    @property
    def rule(self) -> Optional[str]:
        return self.document.get("rule") if self.document else None


class NotFoundError(CordonApiError):
    """404: no such job visible to this token."""


class ConflictError(CordonApiError):
    """409: the idempotency key already names a job submitted with a different type or
    inputs; ``existing_job_id`` names it."""

    @property
    def existing_job_id(self) -> Optional[str]:
        return self.document.get("job") if self.document else None


class PayloadTooLargeError(CordonApiError):
    """413: the request body is larger than the server takes."""


class RateLimitedError(CordonApiError):
    """429: try again later (``retry_after`` seconds)."""


class BusyError(RateLimitedError):
    """429 ``busy``: the project's queue is full, or the token holds too many live logs."""


class BudgetError(RateLimitedError):
    """429 ``budget``: the project's daily budget is spent until ``resets_at``."""

    @property
    def resets_at(self) -> Optional[datetime]:
        at = self.document.get("resets_at") if self.document else None
        return _parse_rfc3339(at) if at else None


class ServerError(CordonApiError):
    """5xx: the server failed."""


class CordonConnectionError(CordonError):
    """The server could not be reached, or the connection broke (after the retries allowed)."""


class WaitTimeoutError(CordonError):
    """``wait`` ran out of time before the job ended."""

    def __init__(self, job_id: str, timeout: float) -> None:
        super().__init__(f"job {job_id} did not end within {timeout} s")
        self.job_id = job_id
        self.timeout = timeout


class JobFailedError(CordonError):
    """A job of a chain did not succeed (or a verify ended without a report)."""

    def __init__(self, job: JobDocument, message: Optional[str] = None) -> None:
        failure = job.get("failure")
        why = f": {failure['category']}: {failure['reason']}" if failure else ""
        super().__init__(message or f"{job['type']} job {job['id']} ended {job['state']}{why}")
        self.job = job


def _parse_rfc3339(text: str) -> datetime:
    from datetime import datetime

    # Python 3.10's fromisoformat takes no "Z".
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Seconds in a ``Retry-After`` value (delta-seconds or an HTTP date), if it is one."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    from email.utils import parsedate_to_datetime

    try:
        at = parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, float(int(at - (time.time() if now is None else now) + 0.999)))


_CLASSES = {400: BadRequestError, 401: UnauthorizedError, 404: NotFoundError, 409: ConflictError,
            413: PayloadTooLargeError}


def error_from_answer(
    status: int, headers: Mapping[str, str], body: bytes, now: Optional[float] = None
) -> CordonApiError:
    """The error an answer that is not 2xx stands for."""
    document: Any = None
    try:
        parsed = json.loads(body)
        if isinstance(parsed, dict) and parsed.get("schema") == "cordon.api-error/v1":
            document = parsed
    except ValueError:
        pass  # Not JSON (a proxy's page, axum's 413): the status alone speaks.
    retry_after = parse_retry_after(headers.get("retry-after"), now)
    if retry_after is None and document and document.get("resets_at"):
        try:
            at = _parse_rfc3339(document["resets_at"]).timestamp()
            retry_after = max(0.0, float(int(at - (time.time() if now is None else now) + 0.999)))
        except ValueError:
            pass
    if document:
        rule = f" (rule {document['rule']})" if document.get("rule") else ""
        message = f"{status} {document['error']}: {document['message']}{rule}"
    else:
        text = body.decode("utf-8", "replace").strip()[:200]
        message = f"{status}: {text or 'no error document'}"
    code = document.get("error") if document else None
    cls: type[CordonApiError]
    if status == 403:
        cls = PolicyError if code == "policy" else ForbiddenError
    elif status == 429:
        cls = BudgetError if code == "budget" else BusyError if code == "busy" else RateLimitedError
    elif status >= 500:
        cls = ServerError
    else:
        cls = _CLASSES.get(status, CordonApiError)
    return cls(status, document, message, retry_after)
