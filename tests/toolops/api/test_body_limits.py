"""Body limits and strict JSON through a real ToolOps server (uvicorn, ASGI), over HTTP:
the cap must hold for chunked bodies too, which only the real server can show."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.toolops.api.helpers import assert_problem
from toolops.models import Agent, Run

MIB = 1024 * 1024


def big_body(size: int = 2 * MIB) -> bytes:
    head, tail = b'{"run_id": "r-big", "metadata": {"pad": "', b'"}}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def chunks(data: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.fixture
def post(toolops_server: Any, agent_a: tuple[Agent, str]) -> Any:
    server = toolops_server()
    headers = {"Authorization": f"Bearer {agent_a[1]}", "Content-Type": "application/json"}

    def send(content: bytes | Iterator[bytes], path: str = "/api/v1/runs") -> httpx.Response:
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
            return client.post(path, content=content)

    return send


def test_it_refuses_a_large_body_with_content_length(post: Any) -> None:
    response = post(big_body())

    assert_problem(response, 413)
    assert response.request.headers.get("content-length") == str(2 * MIB)
    assert not Run.objects.exists()


def test_it_refuses_a_large_chunked_body(post: Any) -> None:
    response = post(chunks(big_body()))

    assert_problem(response, 413)
    assert "content-length" not in response.request.headers
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert not Run.objects.exists()


def test_it_accepts_a_small_chunked_body(post: Any) -> None:
    payload = json.dumps({"run_id": "r-chunked", "metadata": {"a": 1}}).encode()

    response = post(chunks(payload, size=8))

    assert response.status_code == 201, response.text
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert response.json()["run_id"] == "r-chunked"
    assert Run.objects.get(run_id="r-chunked").metadata == {"a": 1}


def test_it_accepts_a_chunked_body_of_exactly_1_mib(post: Any) -> None:
    response = post(chunks(big_body(MIB)))

    assert response.status_code == 201, response.text[:300]
    assert Run.objects.filter(run_id="r-big").exists()


def test_it_refuses_bad_json(post: Any) -> None:
    for raw in (
        b'{"run_id": "r-1"',
        b'{"run_id": NaN}',
        b'{"run_id": "r-1", "metadata": {"x": Infinity}}',
        b'{"run_id": "r-1", "metadata": {"x": -Infinity}}',
    ):
        response = post(raw)

        assert_problem(response, 400)
    assert not Run.objects.exists()
