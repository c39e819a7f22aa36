"""Small helpers shared by the API contract tests."""

from __future__ import annotations

import json
import threading
from typing import Any

from rest_framework.test import APIClient

ID_CHARS = "[A-Za-z0-9._:-]"


def body(response: Any) -> Any:
    """The JSON body of a test-client or httpx response."""
    raw = response.content
    return json.loads(raw) if raw else None


def assert_problem(response: Any, status: int) -> dict[str, Any]:
    """An RFC 9457 problem body: at least status, title and a non-empty detail (API.md)."""
    code = getattr(response, "status_code", None)
    assert code == status, (code, response.content[:500])
    problem = body(response)
    assert isinstance(problem, dict), problem
    assert problem.get("status") == status, problem
    assert isinstance(problem.get("title"), str) and problem["title"].strip(), problem
    assert isinstance(problem.get("detail"), str) and problem["detail"].strip(), problem
    return problem


def create_run(client: APIClient, run_id: str = "r-1", **fields: Any) -> dict[str, Any]:
    response = client.post("/api/v1/runs", {"run_id": run_id, **fields}, format="json")
    assert response.status_code == 201, response.content
    return body(response)


def post_call(client: APIClient, run_id: str = "r-1", **fields: Any) -> Any:
    return client.post(f"/api/v1/runs/{run_id}/calls", fields, format="json")


def post_raw(client: APIClient, url: str, raw: str | bytes) -> Any:
    return client.generic("POST", url, raw, content_type="application/json")


class Sent:
    """Set once httpx has sent a request whole: pass `sent.extensions` to the request, then
    `sent.wait(…)` before acting on the server while it holds that request."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.extensions = {"trace": self._trace}

    def _trace(self, event: str, info: Any) -> None:
        if event == "http11.send_request_body.complete":
            self.event.set()

    def wait(self, timeout: float) -> bool:
        return self.event.wait(timeout)
