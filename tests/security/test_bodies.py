"""Abuse cases for bodies and sizes, against a real ToolOps server (uvicorn) where the
server's own handling is the point: bodies on any method past 1 MiB, chunked or not;
bodies trickled to hold connections; a downstream answering 50 MiB; a run of more calls
than one answer should carry."""

from __future__ import annotations

import json
import select
import socket
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from rest_framework.test import APIClient

from tests.conftest import write_catalog
from tests.toolops.api.helpers import assert_problem, body, create_run, post_call
from tests.toolops.api.test_run_get import add_calls
from tests.toolops.tools.big import MIB, BigServer, big_tools
from toolops.models import Agent, Run
from toolops.tools import registry

# Generous: "still served during the attack", on a machine shared with other work.
SERVED_WITHIN_S = 10.0


def chunks(data: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def raw_request(port: int, head: str) -> socket.socket:
    """A connection that has sent `head` (request line and headers) and nothing more."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n")
    return sock


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


@pytest.fixture
def server(toolops_server: Any) -> Any:
    return toolops_server()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/runs/r-1"),
        ("HEAD", "/api/v1/tools"),
        ("OPTIONS", "/api/v1/runs"),
        ("GET", "/mcp/"),
        ("GET", "/console/login/"),
    ],
)
def test_it_refuses_a_2_mib_body_on_a_get_head_or_options(
    server: Any, agent_a: tuple[Agent, str], method: str, path: str
) -> None:
    headers = {"Authorization": f"Bearer {agent_a[1]}"}

    response = httpx.request(
        method, server.url + path, content=b"x" * (2 * MIB), headers=headers, timeout=30
    )

    assert response.status_code == 413
    assert response.headers["connection"] == "close"
    if method != "HEAD":  # a HEAD answer has no body
        assert_problem(response, 413)


def test_it_refuses_a_big_get_body_before_authenticating_it(server: Any) -> None:
    # No token: refused for its size before anything looks at who sent it.
    response = httpx.request(
        "GET", f"{server.url}/api/v1/tools", content=b"x" * (2 * MIB), timeout=30
    )

    assert_problem(response, 413)


def test_it_refuses_a_chunked_get_body_over_1_mib(server: Any, agent_a: tuple[Agent, str]) -> None:
    headers = {"Authorization": f"Bearer {agent_a[1]}"}

    response = httpx.request(
        "GET",
        f"{server.url}/api/v1/tools",
        content=chunks(b"x" * (MIB + 1)),
        headers=headers,
        timeout=30,
    )

    assert_problem(response, 413)
    assert response.request.headers["transfer-encoding"] == "chunked"


def test_it_answers_408_to_a_body_trickled_too_slowly(
    toolops_server: Any, agent_a: tuple[Agent, str]
) -> None:
    server = toolops_server(TOOLOPS_BODY_READ_TIMEOUT_S="1")
    sock = raw_request(
        server.port,
        (
            "POST /api/v1/runs HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
            f"Authorization: Bearer {agent_a[1]}\nContent-Length: 1000\n"
        ),
    )
    started = time.monotonic()
    payload = b'{"run_id": "r-slow", "metadata": {"pad": "' + b"x" * 1000
    sent = 0
    # A byte every 0.1 s, each well within any idle timeout, until the server answers.
    while not select.select([sock], [], [], 0.1)[0]:
        assert time.monotonic() - started < SERVED_WITHIN_S, "no answer to a trickled body"
        sock.sendall(payload[sent : sent + 1])
        sent += 1

    answer = read_all(sock)  # returns: the server closed the connection
    sock.close()
    head, _, problem = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ")
    assert b"connection: close" in head.lower()
    assert json.loads(problem)["detail"] == "The request body did not arrive within 1 s."
    assert sent < 1000
    assert not Run.objects.exists()


def test_another_agent_is_served_while_slow_bodies_hold_connections(
    toolops_server: Any, agent_b: tuple[Agent, str]
) -> None:
    server = toolops_server(TOOLOPS_BODY_READ_TIMEOUT_S="60")
    # No token needed to hold a connection: the body comes before authentication.
    attackers = [
        raw_request(
            server.port, ("POST /api/v1/runs HTTP/1.1\nHost: 127.0.0.1\nContent-Length: 1048576\n")
        )
        for _ in range(100)
    ]
    for sock in attackers:
        sock.sendall(b'{"run_id": "r-')
    try:
        headers = {"Authorization": f"Bearer {agent_b[1]}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
            started = time.monotonic()
            tools = client.get("/api/v1/tools")
            run = client.post("/api/v1/runs", json={"run_id": "r-b"})
            elapsed = time.monotonic() - started
    finally:
        for sock in attackers:
            sock.close()

    assert tools.status_code == 200 and run.status_code == 201
    assert elapsed < SERVED_WITHIN_S
    assert list(Run.objects.values_list("run_id", flat=True)) == ["r-b"]


@pytest.fixture
def big_downstream(shop: Any, settings: Any) -> Iterator[BigServer]:
    big = BigServer()
    path = write_catalog(shop.url, big_tools(big.url))
    settings.TOOLOPS_TOOLS_FILE = str(path)
    registry.reset()
    yield big
    registry.reset()
    path.unlink(missing_ok=True)
    big.stop()


@pytest.mark.django_db
def test_it_fails_a_call_whose_downstream_answers_50_mib(
    api: APIClient, big_downstream: BigServer
) -> None:
    create_run(api)

    tracemalloc.start()
    try:
        response = post_call(api, step_index=0, tool="big_report", args={})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    call = body(response)
    assert call["status"] == "failed"
    assert call["error"]["reason"] == "downstream_error"
    assert "larger than 10 MiB (10485760 bytes)" in call["error"]["message"]
    assert call["attempts"] == 1 and big_downstream.requests == 1
    assert peak < 25 * MIB, peak  # the 50 MiB answer was never held


@pytest.mark.django_db
def test_it_pages_a_run_of_1001_calls(api: APIClient, agent_a: tuple[Agent, str]) -> None:
    create_run(api)
    add_calls(Run.objects.get(run_id="r-1"), 1001)

    first = body(api.get("/api/v1/runs/r-1"))
    rest = body(api.get(first["calls_next"]))

    assert len(first["calls"]) == 1000 and first["calls_total"] == 1001
    assert len(rest["calls"]) == 1 and rest["calls_next"] is None


@pytest.mark.django_db
def test_it_refuses_an_unknown_calls_after(api: APIClient) -> None:
    create_run(api)

    assert_problem(api.get("/api/v1/runs/r-1?calls_after=c-nope"), 400)
