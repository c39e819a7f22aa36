"""What a transport reports of one attempt, before anyone judges it: the contract between
the transports (http.py, local.py) and the executor's classifier
(toolops/executor/classify.py). It lives with the transports, so that they import
nothing of the executor that consumes them."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any


class Failure(enum.StrEnum):
    """How an attempt went wrong, before we judge whether it matters."""

    TIMEOUT = "timeout"  # the request may have been sent and processed
    REFUSED = "refused"  # the connection was never made: provably not sent
    RESET = "reset"  # the connection broke mid-request
    HTTP = "http"  # the downstream answered a non-2xx status
    INVALID_BODY = "invalid_body"  # 2xx whose body is not JSON
    TOO_LARGE = "too_large"  # 2xx whose body is past TOOLOPS_DOWNSTREAM_MAX_BYTES, unread
    ERROR = "error"  # a Python tool raised


@dataclass(frozen=True)
class Outcome:
    status: int | None = None
    body: Any = None
    failure: Failure | None = None
    message: str = ""
    retry_after: float | None = None
    request_id: str = ""
    # Python tools may say themselves whether a failure is worth retrying.
    retryable: bool | None = None
    # For operators only (the attempt's error, in the console), when `message` — which
    # reaches the call's error and the model — must not say it: an exception's text.
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.failure is None


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After in seconds or as an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
