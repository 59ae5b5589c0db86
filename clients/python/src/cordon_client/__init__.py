"""``cordon-client``: a typed client of cordon's job service (``cordon serve``), sync
(:class:`Client`) and async (:class:`AsyncClient`), on httpx.

The service's documents are typed in :mod:`cordon_client.types` (generated from the
committed schemas). Importing this package is cheap: httpx is imported when a client is
made.
"""

from ._async import AsyncClient
from ._core import FINAL_STATES, VERSION, JobEvent, RetryInfo, SseParser
from ._errors import (
    BadRequestError,
    BudgetError,
    BusyError,
    ConflictError,
    CordonApiError,
    CordonConnectionError,
    CordonError,
    ForbiddenError,
    JobFailedError,
    NotFoundError,
    PayloadTooLargeError,
    PolicyError,
    RateLimitedError,
    ServerError,
    UnauthorizedError,
    WaitTimeoutError,
    error_from_answer,
    parse_retry_after,
)
from ._sync import Client

__version__ = VERSION

__all__ = [
    "AsyncClient",
    "BadRequestError",
    "BudgetError",
    "BusyError",
    "Client",
    "ConflictError",
    "CordonApiError",
    "CordonConnectionError",
    "CordonError",
    "FINAL_STATES",
    "ForbiddenError",
    "JobEvent",
    "JobFailedError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PolicyError",
    "RateLimitedError",
    "RetryInfo",
    "ServerError",
    "SseParser",
    "UnauthorizedError",
    "VERSION",
    "WaitTimeoutError",
    "error_from_answer",
    "parse_retry_after",
]
