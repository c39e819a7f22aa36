"""POST /api/v1/runs: create or resume a run."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.toolops.api.helpers import assert_problem, body, post_raw
from toolops.models import Agent, Run

pytestmark = pytest.mark.django_db

HEX32 = re.compile(r"^[0-9a-f]{32}$")
ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


@pytest.fixture(autouse=True)
def no_default_budget(settings: Any) -> None:
    # A run without a budget has no limits unless the deployment sets a default.
    settings.TOOLOPS_DEFAULT_MAX_ATTEMPTS = None
    settings.TOOLOPS_DEFAULT_MAX_SECONDS = None
    settings.TOOLOPS_DEFAULT_MAX_TOKENS = None


def assert_utc(stamp: str) -> None:
    parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert parsed.utcoffset() is not None and parsed.utcoffset().total_seconds() == 0, stamp


def test_it_creates_a_run_with_generated_ids(api: APIClient, agent_a: tuple[Agent, str]) -> None:
    response = api.post("/api/v1/runs", {}, format="json")

    assert response.status_code == 201, response.content
    run = body(response)
    assert ID_RE.match(run["run_id"]), run["run_id"]
    assert HEX32.match(run["trace_id"]), run["trace_id"]
    assert run["session_key"] is None
    assert run["status"] == "running"
    assert run["budget"] == {"max_attempts": None, "max_seconds": None, "max_tokens": None}
    assert run["usage"]["attempts"] == 0
    assert run["usage"]["tokens"] == 0
    assert run["calls"] == []
    assert run["compensations"] == []
    assert run["last_succeeded_tool_call_id"] is None
    assert run["ended_at"] is None
    assert_utc(run["created_at"])

    row = Run.objects.get()
    assert row.agent == agent_a[0]
    assert row.run_id == run["run_id"]
    assert row.trace_id == run["trace_id"]
    assert row.session_key is None


def test_it_creates_a_run_with_an_empty_body(api: APIClient) -> None:
    response = api.generic("POST", "/api/v1/runs", "", content_type="application/json")

    assert response.status_code == 201, response.content
    assert Run.objects.count() == 1


def test_it_keeps_the_given_fields(api: APIClient) -> None:
    response = api.post(
        "/api/v1/runs",
        {
            "run_id": "r-118",
            "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
            "session_key": "conv-42",
            "budget": {"max_attempts": 20, "max_seconds": 300, "max_tokens": 200000},
            "metadata": {"ticket": "T-9"},
        },
        format="json",
    )

    assert response.status_code == 201, response.content
    run = body(response)
    assert run["run_id"] == "r-118"
    assert run["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert run["session_key"] == "conv-42"
    assert run["budget"] == {"max_attempts": 20, "max_seconds": 300, "max_tokens": 200000}
    row = Run.objects.get(run_id="r-118")
    assert (row.max_attempts, row.max_seconds, row.max_tokens) == (20, 300, 200000)
    assert row.session_key == "conv-42"
    assert row.metadata == {"ticket": "T-9"}


def test_it_shows_a_missing_limit_as_null(api: APIClient) -> None:
    response = api.post(
        "/api/v1/runs", {"run_id": "r-1", "budget": {"max_attempts": 5}}, format="json"
    )

    assert response.status_code == 201, response.content
    assert body(response)["budget"] == {"max_attempts": 5, "max_seconds": None, "max_tokens": None}


def test_it_resumes_an_existing_run_with_200(api: APIClient) -> None:
    first = api.post("/api/v1/runs", {"run_id": "r-1", "session_key": "s-1"}, format="json")
    again = api.post("/api/v1/runs", {"run_id": "r-1", "session_key": "s-1"}, format="json")

    assert first.status_code == 201, first.content
    assert again.status_code == 200, again.content
    assert body(again)["run_id"] == "r-1"
    assert body(again)["trace_id"] == body(first)["trace_id"]
    assert body(again)["created_at"] == body(first)["created_at"]
    assert Run.objects.filter(run_id="r-1").count() == 1


def test_it_keys_runs_by_agent(
    api: APIClient, agent_a: tuple[Agent, str], agent_b: tuple[Agent, str]
) -> None:
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_b[1]}")

    mine = api.post("/api/v1/runs", {"run_id": "r-1"}, format="json")
    theirs = other.post("/api/v1/runs", {"run_id": "r-1"}, format="json")

    assert mine.status_code == 201, mine.content
    assert theirs.status_code == 201, theirs.content
    assert body(mine)["trace_id"] != body(theirs)["trace_id"]
    assert Run.objects.filter(run_id="r-1", agent=agent_a[0]).count() == 1
    assert Run.objects.filter(run_id="r-1", agent=agent_b[0]).count() == 1
    assert body(other.get("/api/v1/runs/r-1"))["trace_id"] == body(theirs)["trace_id"]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"run_id": ""}, "run_id"),
        ({"run_id": "has space"}, "run_id"),
        ({"run_id": "r" * 129}, "run_id"),
        ({"run_id": "r/1"}, "run_id"),
        ({"run_id": 12}, "run_id"),
        ({"trace_id": "XYZ"}, "trace_id"),
        ({"trace_id": "4BF92F3577B34DA6A3CE929D0E0E4736"}, "trace_id"),
        ({"session_key": "has space"}, "session_key"),
        ({"budget": {"max_attempts": -1}}, "max_attempts"),
        ({"budget": {"max_attempts": "x"}}, "max_attempts"),
        ({"budget": {"max_tokens": -5}}, "max_tokens"),
        ({"budget": "lots"}, "budget"),
        ({"metadata": [1, 2]}, "metadata"),
    ],
)
def test_it_rejects_bad_input_naming_the_field(
    api: APIClient, payload: dict[str, Any], field: str
) -> None:
    response = api.post("/api/v1/runs", payload, format="json")

    problem = assert_problem(response, 400)
    assert field in problem["detail"], problem
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "raw",
    [
        "[]",
        '[{"run_id": "r-1"}]',
        '{"run_id": "r-1"',
        "not json",
        '{"run_id": NaN}',
        '{"run_id": "r-1", "budget": {"max_seconds": Infinity}}',
        '{"run_id": "r-1", "metadata": {"x": -Infinity}}',
        '"r-1"',
    ],
)
def test_it_rejects_a_body_that_is_not_a_json_object(api: APIClient, raw: str) -> None:
    response = post_raw(api, "/api/v1/runs", raw)

    assert_problem(response, 400)
    assert not Run.objects.exists()


def test_it_rejects_a_body_over_1_mib(api: APIClient) -> None:
    raw = '{"run_id": "r-big", "metadata": {"pad": "' + "x" * (2 * 1024 * 1024) + '"}}'

    response = post_raw(api, "/api/v1/runs", raw)

    assert_problem(response, 413)
    assert not Run.objects.exists()


def test_it_accepts_a_body_just_under_1_mib(api: APIClient) -> None:
    head = '{"run_id": "r-big", "metadata": {"pad": "'
    tail = '"}}'
    raw = head + "x" * (1024 * 1024 - len(head) - len(tail)) + tail
    assert len(raw) == 1024 * 1024

    response = post_raw(api, "/api/v1/runs", raw)

    assert response.status_code == 201, response.content[:300]
    assert Run.objects.filter(run_id="r-big").exists()
