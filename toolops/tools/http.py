"""The HTTP transport: one pooled client per process, no client-side retries (retries
live in the executor alone), a timeout per attempt, and a cap on what a downstream's
answer may make us hold (TOOLOPS_DOWNSTREAM_MAX_BYTES): a longer body is not read.

urllib3 rather than httpx on this path: the same pooling and timeouts for ~0.4 ms less
per request, which is a tenth of a call's whole overhead."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import urllib3
from django.conf import settings
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
)

from toolops import jsonbound
from toolops.tools.outcome import Failure, Outcome, parse_retry_after

# Thread-safe; keeps connections alive per host, and checks a pooled connection is still
# open before reusing it. retries=False: the executor owns every retry.
_pool = urllib3.PoolManager(num_pools=50, maxsize=32, block=False, retries=False)


def send(
    *, url: str, method: str, body: dict[str, Any], headers: dict[str, str], timeout_s: float
) -> Outcome:
    payload: bytes | None = None
    if method == "GET":
        url = f"{url}?{urlencode(_query_params(body))}" if body else url
    else:
        payload = json.dumps(body, separators=(",", ":")).encode()
        headers = {**headers, "Content-Type": "application/json"}
    cap = settings.TOOLOPS_DOWNSTREAM_MAX_BYTES
    try:
        response = _pool.request(
            method,
            url,
            body=payload,
            headers=headers,
            timeout=urllib3.Timeout(connect=timeout_s, read=timeout_s),
            redirect=False,
            preload_content=False,
        )
        data = _read_capped(response, cap)
    except HTTPError as exc:
        return _transport_failure(exc, timeout_s)
    return _answered(response, data, cap)


def _transport_failure(exc: HTTPError, timeout_s: float) -> Outcome:
    """No answer: which failure, for the executor to judge whether to retry. Checked in
    this order because NewConnectionError is a ConnectTimeoutError, and every one of
    them an HTTPError."""
    if isinstance(exc, NewConnectionError):
        # Refused (or unreachable): the request was never sent.
        return Outcome(failure=Failure.REFUSED, message=f"connection refused ({_reason(exc)})")
    if isinstance(exc, ConnectTimeoutError):
        return Outcome(failure=Failure.REFUSED, message=f"could not connect in {timeout_s:g} s")
    if isinstance(exc, ReadTimeoutError):
        return Outcome(failure=Failure.TIMEOUT, message=f"no response within {timeout_s:g} s")
    if isinstance(exc, ProtocolError):
        return Outcome(
            failure=Failure.RESET, message=f"connection lost mid-request ({_reason(exc)})"
        )
    return Outcome(failure=Failure.RESET, message=f"request failed ({type(exc).__name__})")


def _answered(response: urllib3.BaseHTTPResponse, data: bytes | None, cap: int) -> Outcome:
    """The outcome of a request the downstream answered: its body read (`data`, None when
    it was over `cap` bytes), judged by its status."""
    status = response.status
    request_id = (response.headers.get("x-request-id") or "")[:128]
    if data is None and 200 <= status < 300:
        # The downstream answered, and for a write did what was asked: the executor
        # decides what that means for the call (classify.py, Failure.TOO_LARGE).
        return Outcome(
            status=status,
            failure=Failure.TOO_LARGE,
            message=too_large_message(cap),
            request_id=request_id,
        )
    body_value: Any = None
    if data:
        try:
            # A downstream is outside too: the bounds of toolops.jsonbound (a deep body
            # was a RecursionError, NaN a row PostgreSQL refuses). Not its widths: a
            # search may rightly answer many rows, and the response's size has its own
            # bound (TOOLOPS_DOWNSTREAM_MAX_BYTES). A U+0000, which no column stores, is
            # replaced rather than refused: a write's answer must be kept.
            body_value = jsonbound.loads(data.decode("utf-8"), limits=None, nul="replace")
        except ValueError:
            if 200 <= status < 300:
                return Outcome(
                    status=status,
                    failure=Failure.INVALID_BODY,
                    message="the response body is not JSON",
                    request_id=request_id,
                )
    if 200 <= status < 300:
        return Outcome(status=status, body=body_value, request_id=request_id)
    # A refusal is judged by its status alone: an error page past the cap is not read.
    unread = f" (its body, over {cap} bytes, was not read)" if data is None else ""
    return Outcome(
        status=status,
        body=body_value,
        failure=Failure.HTTP,
        message=f"HTTP {status}{_detail(body_value)}{unread}",
        retry_after=parse_retry_after(response.headers.get("retry-after")),
        request_id=request_id,
    )


def too_large_message(cap: int) -> str:
    return f"the response was larger than {_size(cap)}, the most ToolOps reads"


def _size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.4g} {unit} ({n} bytes)"
    return f"{n} bytes"


def _read_capped(response: urllib3.BaseHTTPResponse, cap: int) -> bytes | None:
    """The (decoded) body, or None when it is longer than `cap` bytes: then no more of it
    is read than the cap and a chunk, and its connection is closed rather than pooled
    (the rest of the body is still on it). A compressed body counts as it decodes."""
    declared = response.headers.get("content-length", "")
    if not (declared.isdigit() and int(declared) > cap):
        # One read: urllib3 decodes at most this much (a compression bomb stops here too).
        data = response.read(cap + 1)
        if len(data) <= cap:
            response.release_conn()
            return data
    response.close()
    response.release_conn()
    return None


def _reason(exc: Exception) -> str:
    text = str(exc)
    return text.rsplit(": ", 1)[-1][:120] if ": " in text else text[:120]


def _query_params(body: dict[str, Any]) -> dict[str, str]:
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in body.items()}


def _detail(body: Any) -> str:
    if isinstance(body, dict):
        for key in ("detail", "error", "message", "title"):
            if isinstance(body.get(key), str):
                return f": {body[key][:200]}"
    return ""
