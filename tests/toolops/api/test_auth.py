"""Bearer tokens, per-agent isolation, malformed path ids and the per-agent rate limit."""

from __future__ import annotations

import time

import pytest
from rest_framework.test import APIClient

from tests.toolops.api.helpers import assert_problem, body, create_run, post_call
from toolops.api import auth
from toolops.models import Agent, Run, ToolCall
from toolops.services import agent_create

pytestmark = pytest.mark.django_db


def client_for(token: str | None = None, header: str | None = None) -> APIClient:
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)
    elif token is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def unknown_tool_call(client: APIClient, run_id: str = "r-1") -> dict[str, object]:
    """A call that needs no downstream: an unknown tool is a recorded, failed call."""
    response = post_call(client, run_id, step_index=0, tool="no_such_tool", args={})
    assert response.status_code == 200, response.content
    return body(response)


def test_it_answers_401_problem_without_a_token() -> None:
    response = client_for().get("/api/v1/tools")

    assert_problem(response, 401)
    assert response.has_header("WWW-Authenticate")
    assert response["WWW-Authenticate"].strip()


def test_it_writes_nothing_without_a_token() -> None:
    response = client_for().post("/api/v1/runs", {"run_id": "r-1"}, format="json")

    assert_problem(response, 401)
    assert response.has_header("WWW-Authenticate")
    assert not Run.objects.exists()


def test_it_answers_401_for_a_bad_token(agent_a: tuple[Agent, str]) -> None:
    response = client_for(token=agent_a[1] + "x").post(
        "/api/v1/runs", {"run_id": "r-1"}, format="json"
    )

    assert_problem(response, 401)
    assert not Run.objects.exists()


def test_it_answers_401_for_a_token_scheme(agent_a: tuple[Agent, str]) -> None:
    response = client_for(header=f"Token {agent_a[1]}").get("/api/v1/tools")

    assert_problem(response, 401)


def test_it_answers_401_for_a_bare_token(agent_a: tuple[Agent, str]) -> None:
    response = client_for(header="Token x").get("/api/v1/tools")

    assert_problem(response, 401)


def test_it_answers_401_for_an_inactive_agent(agent_a: tuple[Agent, str]) -> None:
    Agent.objects.filter(pk=agent_a[0].pk).update(is_active=False)

    response = client_for(token=agent_a[1]).get("/api/v1/tools")

    assert_problem(response, 401)


def test_it_hides_another_agents_run(api: APIClient, agent_b: tuple[Agent, str]) -> None:
    create_run(api, "r-1")
    other = client_for(token=agent_b[1])

    assert_problem(other.get("/api/v1/runs/r-1"), 404)
    assert_problem(other.post("/api/v1/runs/r-1/complete", {}, format="json"), 404)
    assert_problem(other.post("/api/v1/runs/r-1/abort", {"reason": "x"}, format="json"), 404)
    assert_problem(post_call(other, "r-1", step_index=0, tool="no_such_tool", args={}), 404)

    run = Run.objects.get(run_id="r-1")
    assert run.status == Run.Status.RUNNING
    assert run.ended_at is None
    assert not ToolCall.objects.exists()


def test_it_hides_another_agents_call(api: APIClient, agent_b: tuple[Agent, str]) -> None:
    create_run(api, "r-1")
    call = unknown_tool_call(api)

    response = client_for(token=agent_b[1]).get(f"/api/v1/calls/{call['call_id']}")

    assert_problem(response, 404)
    assert api.get(f"/api/v1/calls/{call['call_id']}").status_code == 200


@pytest.mark.parametrize("bad_id", ["bad%20id%21", "x" * 200, "r%2F1"])
def test_it_answers_404_for_a_malformed_run_id(api: APIClient, bad_id: str) -> None:
    assert_problem(api.get(f"/api/v1/runs/{bad_id}"), 404)
    assert_problem(api.post(f"/api/v1/runs/{bad_id}/complete", {}, format="json"), 404)
    assert_problem(api.post(f"/api/v1/runs/{bad_id}/abort", {}, format="json"), 404)
    assert_problem(post_call(api, bad_id, step_index=0, tool="query_stock", args={}), 404)
    assert not ToolCall.objects.exists()


@pytest.mark.parametrize("bad_id", ["bad%20id%21", "c" * 200])
def test_it_answers_404_for_a_malformed_call_id(api: APIClient, bad_id: str) -> None:
    assert_problem(api.get(f"/api/v1/calls/{bad_id}"), 404)


def test_it_answers_404_for_a_missing_run(api: APIClient) -> None:
    assert_problem(api.get("/api/v1/runs/r-missing"), 404)
    assert_problem(api.get("/api/v1/calls/c-missing"), 404)


def test_it_serves_the_schema_without_a_token() -> None:
    response = client_for().get("/api/v1/schema/", HTTP_ACCEPT="application/json")

    assert response.status_code == 200, response.content[:300]
    assert body(response)["openapi"].startswith("3.")


class Clock:
    """The rate limit's wall clock, set by the test: a burst lands in one window, and the
    next window comes when the test says, without waiting for a minute to turn."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    # 20 s into a minute (an arbitrary one, as the clock's own minutes are).
    clock = Clock(float(int(time.time() // 60) * 60 + 20))
    monkeypatch.setattr(auth, "clock", clock)
    return clock


def test_it_limits_an_agent_to_its_rate(db: None, clock: Clock) -> None:
    _, token = agent_create(name="limited", rate_limit_per_minute=3)
    client = client_for(token=token)

    statuses = [
        client.post("/api/v1/runs", {"run_id": f"r-{i}"}, format="json").status_code
        for i in range(3)
    ]
    fourth = client.post("/api/v1/runs", {"run_id": "r-3"}, format="json")

    assert statuses == [201, 201, 201]
    assert_problem(fourth, 429)
    assert fourth["Retry-After"] == "40"  # the rest of the minute
    assert not Run.objects.filter(run_id="r-3").exists()
    assert Run.objects.count() == 3

    clock.now += 39.5  # still the same minute
    assert client.post("/api/v1/runs", {"run_id": "r-3"}, format="json").status_code == 429
    clock.now += 1  # the next one: a fresh count
    assert client.post("/api/v1/runs", {"run_id": "r-3"}, format="json").status_code == 201


def test_it_limits_each_agent_separately(db: None, api: APIClient, clock: Clock) -> None:
    _, token = agent_create(name="limited", rate_limit_per_minute=1)
    limited = client_for(token=token)

    assert limited.get("/api/v1/runs/r-x").status_code == 404
    assert limited.get("/api/v1/runs/r-x").status_code == 429
    assert api.get("/api/v1/runs/r-x").status_code == 404


def test_it_never_limits_an_agent_without_a_limit(api: APIClient) -> None:
    statuses = {api.get("/api/v1/runs/r-x").status_code for _ in range(12)}

    assert statuses == {404}
