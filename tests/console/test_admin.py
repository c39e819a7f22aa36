"""Django admin registrations: every record is reachable, tokens never are."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from toolops.models import Agent, IdempotencyRecord, ToolCall, ToolPolicy

from .conftest import logged_in, make_attempt, make_call, make_record, make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_(superuser: Any) -> Client:
    return logged_in(superuser)


@pytest.fixture
def records(agent_a: tuple[Agent, str]) -> ToolCall:
    run = make_run(agent_a[0], "r-adm", trace_id="f" * 32)
    call = make_call(run, "tc-adm", 0, "reserve_stock", "succeeded", idempotency_key="e" * 64)
    make_attempt(call, 1, downstream_request_id="req-adm")
    make_record(call)
    ToolPolicy.objects.create(tool="reserve_stock", timeout_s=1.0)
    return call


@pytest.mark.parametrize("model", ["agent", "run", "toolcall", "toolpolicy", "idempotencyrecord"])
def test_it_lists_each_model(admin_client_: Client, records: ToolCall, model: str) -> None:
    assert admin_client_.get(f"/admin/toolops/{model}/").status_code == 200


def test_it_searches_runs_and_calls(admin_client_: Client, records: ToolCall) -> None:
    runs = admin_client_.get("/admin/toolops/run/", {"q": "f" * 32})
    calls = admin_client_.get("/admin/toolops/toolcall/", {"q": "tc-adm"})
    filtered = admin_client_.get("/admin/toolops/toolcall/", {"status": "failed"})

    assert runs.context["cl"].result_count == 1
    assert calls.context["cl"].result_count == 1
    assert filtered.context["cl"].result_count == 0


def test_it_shows_a_calls_attempts_read_only(admin_client_: Client, records: ToolCall) -> None:
    page = admin_client_.get(f"/admin/toolops/toolcall/{records.pk}/change/")

    assert page.status_code == 200
    assert b"req-adm" in page.content
    assert b'name="tool_call_id"' not in page.content  # read-only: no inputs
    assert admin_client_.get("/admin/toolops/run/add/").status_code == 403
    record = IdempotencyRecord.objects.get()
    response = admin_client_.post(
        f"/admin/toolops/idempotencyrecord/{record.pk}/change/", {"state": "claimed"}
    )
    assert response.status_code == 403


def test_it_never_shows_a_token(admin_client_: Client, agent_a: tuple[Agent, str]) -> None:
    agent, token = agent_a

    page = admin_client_.get(f"/admin/toolops/agent/{agent.pk}/change/").content.decode()

    assert token not in page
    assert agent.token_hint in page
    assert 'name="token_hash"' not in page  # shown, never editable
    assert admin_client_.get("/admin/toolops/agent/add/").status_code == 403


def test_it_validates_policies_like_the_console(
    admin_client_: Client, superuser: Any, shop: Any
) -> None:
    data = {"tool": "create_order", "timeout_s": "-1", "requires_approval": "unknown"}

    bad = admin_client_.post("/admin/toolops/toolpolicy/add/", data)
    unknown = admin_client_.post(
        "/admin/toolops/toolpolicy/add/", {**data, "tool": "nope", "timeout_s": "1"}
    )
    good = admin_client_.post("/admin/toolops/toolpolicy/add/", {**data, "timeout_s": "1"})

    assert bad.status_code == 200 and b"Timeout must be greater than 0." in bad.content
    assert unknown.status_code == 200 and b"There is no tool named" in unknown.content
    assert good.status_code == 302
    assert ToolPolicy.objects.get().updated_by == superuser
