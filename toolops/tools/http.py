"""The HTTP transport: one pooled client per process, no client-side retries (retries
live in the executor alone), a timeout per attempt."""

from __future__ import annotations

import json
from typing import Any

import httpx

from toolops.executor.classify import Failure, Outcome, parse_retry_after

_client: httpx.Client | None = None


def client() -> httpx.Client:
    # A client per request costs milliseconds (DESIGN.md pitfalls); httpx.Client is
    # thread-safe and pools connections. retries=0: the executor owns every retry.
    global _client
    if _client is None:
        _client = httpx.Client(
            transport=httpx.HTTPTransport(retries=0),
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
            follow_redirects=False,
            trust_env=False,
        )
    return _client


def send(
    *, url: str, method: str, body: dict[str, Any], headers: dict[str, str], timeout_s: float
) -> Outcome:
    try:
        response = client().request(
            method,
            url,
            json=body if method != "GET" else None,
            params=_query_params(body) if method == "GET" else None,
            headers=headers,
            timeout=timeout_s,
        )
    except httpx.ConnectTimeout as exc:
        # Not connected within the timeout: nothing was sent.
        return Outcome(failure=Failure.REFUSED, message=f"could not connect: {exc or 'timed out'}")
    except httpx.TimeoutException:
        return Outcome(failure=Failure.TIMEOUT, message=f"no response within {timeout_s:g} s")
    except httpx.ConnectError as exc:
        return Outcome(failure=Failure.REFUSED, message=f"connection refused ({exc})")
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
        return Outcome(failure=Failure.RESET, message=f"connection lost mid-request ({exc})")
    except httpx.HTTPError as exc:
        return Outcome(failure=Failure.RESET, message=f"request failed ({type(exc).__name__})")

    request_id = response.headers.get("x-request-id", "")[:128]
    body_value: Any = None
    if response.content:
        try:
            body_value = json.loads(response.content)
        except ValueError:
            body_value = None
            if response.is_success:
                return Outcome(
                    status=response.status_code,
                    failure=Failure.INVALID_BODY,
                    message="the response body is not JSON",
                    request_id=request_id,
                )
    if response.is_success:
        return Outcome(status=response.status_code, body=body_value, request_id=request_id)
    return Outcome(
        status=response.status_code,
        body=body_value,
        failure=Failure.HTTP,
        message=f"HTTP {response.status_code}{_detail(body_value)}",
        retry_after=parse_retry_after(response.headers.get("retry-after")),
        request_id=request_id,
    )


def _query_params(body: dict[str, Any]) -> dict[str, str]:
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in body.items()}


def _detail(body: Any) -> str:
    if isinstance(body, dict):
        for key in ("detail", "error", "message", "title"):
            if isinstance(body.get(key), str):
                return f": {body[key][:200]}"
    return ""
