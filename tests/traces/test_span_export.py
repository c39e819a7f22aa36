"""Spans exported through OpenTelemetry by real ToolOps processes to a real OTLP
receiver: the call span and one child span per attempt, in the run's trace, with the ids
the downstream received in `traceparent`."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any
from unittest.mock import patch

import httpx
import pytest

from tests.conftest import Shop
from tests.console.conftest import make_user
from tests.otlp import Receiver
from tests.worker import Worker, wait_for
from toolops.approvals.services import approval_decide
from toolops.models import Approval, Run, ToolCall
from traces import otel

RESERVE = {"sku": "A12", "qty": 1}
AGENT_SPAN = "a1b2c3d4e5f60718"


def export_env(receiver: Receiver, **extra: str) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_SERVICE_NAME": "toolops-test",
        **extra,
    }


def toolops_spans(receiver: Receiver, count: int) -> list[dict[str, Any]]:
    receiver.wait_for(lambda spans: len([s for s in spans if s["scope"] == "toolops"]) >= count)
    return receiver.toolops()


class Agent:
    def __init__(self, url: str, key: str) -> None:
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )
        self.trace_id = uuid.uuid4().hex
        self.run_id = f"r-{uuid.uuid4().hex[:8]}"
        response = self.http.post(
            "/api/v1/runs", json={"run_id": self.run_id, "trace_id": self.trace_id}
        )
        assert response.status_code == 201, response.text

    def call(self, step: int, tool: str, args: dict[str, Any], **headers: str) -> dict[str, Any]:
        response = self.http.post(
            f"/api/v1/runs/{self.run_id}/calls",
            json={"step_index": step, "tool": tool, "args": args},
            headers=headers,
        )
        assert response.status_code in (200, 202), response.text
        return response.json()


def test_a_call_retried_twice_is_one_call_span_with_three_attempt_spans(
    toolops_server: Any, agent_a: tuple[Any, str], shop: Shop, otlp_http: Receiver
) -> None:
    server = toolops_server(**export_env(otlp_http))
    agent = Agent(server.url, agent_a[1])
    shop.fault("/inventory/reservations", fail_next=2, fail_status=503)

    call = agent.call(
        0, "reserve_stock", RESERVE, traceparent=f"00-{agent.trace_id}-{AGENT_SPAN}-01"
    )

    assert (call["status"], call["attempts"]) == ("succeeded", 3)
    spans = toolops_spans(otlp_http, 4)
    assert len(spans) == 4
    [call_span] = [s for s in spans if s["name"] == "execute_tool reserve_stock"]
    attempts = sorted(
        (s for s in spans if s is not call_span), key=lambda s: s["attributes"]["toolops.attempt"]
    )
    row = ToolCall.objects.get(call_id=call["call_id"])

    # One trace, the run's; the call span is the agent's span's child, attempts the call's.
    assert {s["trace_id"] for s in spans} == {agent.trace_id}
    assert call_span["parent_span_id"] == AGENT_SPAN
    assert call_span["span_id"] == row.span_id
    assert all(s["parent_span_id"] == call_span["span_id"] for s in attempts)
    assert call_span["resource"]["service.name"] == "toolops-test"

    assert call_span["attributes"] == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "reserve_stock",
        "gen_ai.tool.call.id": call["tool_call_id"],
        "toolops.run_id": agent.run_id,
        "toolops.call_id": call["call_id"],
        "toolops.step_index": 0,
        "toolops.status": "succeeded",
        "toolops.replayed": False,
        "toolops.args_hash": row.args_digest,
        "toolops.idempotency_key_hmac": otel.key_hmac(row.idempotency_key),
        "toolops.attempts": 3,
    }
    assert call_span["status"] == 1  # OK
    assert call_span["kind"] == 1  # internal

    assert [a["attributes"]["toolops.attempt"] for a in attempts] == [1, 2, 3]
    assert [a["attributes"]["http.response.status_code"] for a in attempts] == [503, 503, 200]
    assert [a["kind"] for a in attempts] == [3, 3, 3]  # client
    assert [a["status"] for a in attempts] == [2, 2, 0]
    for failed in attempts[:2]:
        assert failed["attributes"]["toolops.failure_class"] == "retry"
        assert failed["attributes"]["error.type"]
    assert "error.type" not in attempts[2]["attributes"]
    assert {a["attributes"]["http.request.method"] for a in attempts} == {"POST"}
    assert {a["attributes"]["server.address"] for a in attempts} == {"127.0.0.1"}
    assert attempts[2]["attributes"]["toolops.downstream_request_id"]

    # Each attempt's span id is the parent id its request carried downstream.
    received = [r["headers"]["traceparent"] for r in shop.requests("/inventory/reservations")]
    assert received == [f"00-{agent.trace_id}-{a['span_id']}-01" for a in attempts]
    # The same request again is a replay: a span of its own, linked to the call's.
    again = agent.call(
        0, "reserve_stock", RESERVE, traceparent=f"00-{agent.trace_id}-{AGENT_SPAN}-01"
    )
    assert again["call_id"] == call["call_id"]
    spans = toolops_spans(otlp_http, 5)
    [replay] = [s for s in spans if s["attributes"].get("toolops.replayed")]
    assert replay["name"] == "execute_tool reserve_stock"
    assert (replay["trace_id"], replay["parent_span_id"]) == (agent.trace_id, AGENT_SPAN)
    assert replay["span_id"] != call_span["span_id"]
    assert replay["links"] == [(agent.trace_id, call_span["span_id"])]
    assert len(shop.requests("/inventory/reservations")) == 3  # nothing more was sent

    # No doubled client span from the urllib3 instrumentation, and no server span for
    # the API request: the call span is that request.
    assert not [s for s in otlp_http.spans if "urllib3" in s["scope"]]
    assert not [s for s in otlp_http.spans if s["kind"] == 2 and "/api/" in s["name"]]


def test_a_failed_call_span_is_an_error_and_a_foreign_traceparent_is_not_its_parent(
    toolops_server: Any, agent_a: tuple[Any, str], shop: Shop, otlp_http: Receiver
) -> None:
    server = toolops_server(**export_env(otlp_http))
    agent = Agent(server.url, agent_a[1])
    shop.fault("/inventory/stock", fail_next=1, fail_status=400)
    other_trace = uuid.uuid4().hex

    call = agent.call(
        0, "query_stock", {"sku": "A12"}, traceparent=f"00-{other_trace}-{AGENT_SPAN}-01"
    )

    assert call["status"] == "failed"
    spans = toolops_spans(otlp_http, 2)
    [call_span] = [s for s in spans if s["name"] == "execute_tool query_stock"]
    assert call_span["trace_id"] == agent.trace_id
    assert call_span["parent_span_id"] == ""
    assert call_span["status"] == 2  # ERROR
    assert call_span["attributes"]["error.type"] == "downstream_error"
    assert "toolops.idempotency_key_hmac" not in call_span["attributes"]  # a read
    [attempt] = [s for s in spans if s is not call_span]
    assert attempt["attributes"]["toolops.failure_class"] == "fatal"


def test_console_pages_are_traced_by_the_django_instrumentation(
    toolops_server: Any, otlp_http: Receiver, django_user_model: Any
) -> None:
    server = toolops_server(**export_env(otlp_http))

    assert httpx.get(f"{server.url}/console/login/").status_code == 200

    spans = otlp_http.wait_for(lambda spans: any(s["kind"] == 2 for s in spans))
    [page] = [s for s in spans if s["kind"] == 2]
    assert "opentelemetry.instrumentation.django" in page["scope"]
    attributes = page["attributes"]
    assert attributes.get("http.response.status_code", attributes.get("http.status_code")) == 200


def test_spans_go_out_over_grpc_too(
    toolops_server: Any, agent_a: tuple[Any, str], shop: Shop, otlp_grpc: Receiver
) -> None:
    server = toolops_server(**export_env(otlp_grpc, OTEL_EXPORTER_OTLP_PROTOCOL="grpc"))
    agent = Agent(server.url, agent_a[1])

    call = agent.call(0, "query_stock", {"sku": "A12"})

    spans = toolops_spans(otlp_grpc, 2)
    assert {s["trace_id"] for s in spans} == {agent.trace_id}
    assert {s["name"] for s in spans} == {"execute_tool query_stock", "POST query_stock"}
    assert call["status"] == "succeeded"


FAST = {
    "TOOLOPS_APPROVAL_SWEEP_S": "0.5",
    "TOOLOPS_APPROVAL_GRACE_S": "1",
    "TOOLOPS_COMPENSATION_SWEEP_S": "0.5",
    "TOOLOPS_COMPENSATION_GRACE_S": "1",
}


@pytest.mark.usefixtures("shop")
def test_an_approved_call_continues_its_run_and_an_undo_links_to_what_it_undoes(
    worker: Callable[..., Worker],
    toolops_server: Any,
    agent_a: tuple[Any, str],
    otlp_http: Receiver,
    django_user_model: Any,
) -> None:
    env = export_env(otlp_http)
    server = toolops_server(**env)
    agent = Agent(server.url, agent_a[1])
    reserved = agent.call(0, "reserve_stock", RESERVE)
    held = agent.call(
        1,
        "create_order",
        {"sku": "A12", "qty": 1, "amount": "9.50"},
        traceparent=f"00-{agent.trace_id}-{AGENT_SPAN}-01",
    )
    assert held["status"] == "pending_approval"
    approval = Approval.objects.get()
    rita = make_user(django_user_model, "rita", "reviewers")
    # The worker's sweep starts it (the test process shares no broker with the worker).
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        approval_decide(
            approval=approval, by=rita, approve=True, note="", args_hash=approval.args_hash
        )

    w = worker(**env, **FAST)
    wait_for(lambda: ToolCall.objects.get(call_id=held["call_id"]).status == "succeeded", 20, w)

    spans = toolops_spans(otlp_http, 4)
    order = next(s for s in spans if s["name"] == "execute_tool create_order")
    assert order["trace_id"] == agent.trace_id
    assert order["parent_span_id"] == AGENT_SPAN
    assert order["attributes"]["toolops.status"] == "succeeded"
    order_attempts = [s for s in spans if s["parent_span_id"] == order["span_id"]]
    assert len(order_attempts) == 1 and order_attempts[0]["trace_id"] == agent.trace_id

    # Abort: the worker undoes both writes; each undo starts a trace linked to its call.
    response = agent.http.post(f"/api/v1/runs/{agent.run_id}/abort")
    assert response.status_code in (200, 202), response.text
    wait_for(lambda: Run.objects.get(run_id=agent.run_id).status == "aborted", 30, w)

    spans = toolops_spans(otlp_http, 8)
    reserve_span = next(s for s in spans if s["name"] == "execute_tool reserve_stock")
    release = next(s for s in spans if s["name"] == "execute_tool release_stock")
    cancel = next(s for s in spans if s["name"] == "execute_tool cancel_order")
    assert release["links"] == [(agent.trace_id, reserve_span["span_id"])]
    assert cancel["links"] == [(agent.trace_id, order["span_id"])]
    for undo in (release, cancel):
        assert undo["trace_id"] != agent.trace_id
        assert undo["parent_span_id"] == ""
        assert undo["attributes"]["toolops.role"] == "compensation"
    assert reserve_span["span_id"] == ToolCall.objects.get(call_id=reserved["call_id"]).span_id
    # The worker's tasks are traced by the Celery instrumentation.
    assert [s for s in otlp_http.spans if "celery" in s["scope"]]


SECRETS = {
    "email": "jane.doe@example.com",
    "card": "4111 1111 1111 1111",
    "api_key": "sk-live-0123456789abcdef",
}


def test_no_exported_span_carries_args_results_or_their_secrets(
    toolops_server: Any, agent_a: tuple[Any, str], shop: Shop, otlp_http: Receiver
) -> None:
    server = toolops_server(**export_env(otlp_http))
    agent = Agent(server.url, agent_a[1])
    args = {
        "to": SECRETS["email"],
        "message": f"card {SECRETS['card']} on file",
        "api_key": SECRETS["api_key"],
    }
    sent = agent.call(0, "send_notification", args)
    shop.fault("/notifications", fail_next=1, fail_status=422)
    failed = agent.call(1, "send_notification", {**args, "message": "again"})

    assert sent["status"] == "succeeded" and failed["status"] == "failed"
    spans = toolops_spans(otlp_http, 4)
    text = repr(spans)
    for secret in (*SECRETS.values(), SECRETS["card"].replace(" ", "")):
        assert secret not in text


def test_instrumentations_named_disabled_stay_off(
    toolops_server: Any, agent_a: tuple[Any, str], shop: Shop, otlp_http: Receiver
) -> None:
    env = export_env(otlp_http, OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="django, urllib3")
    server = toolops_server(**env)
    assert httpx.get(f"{server.url}/console/login/").status_code == 200
    agent = Agent(server.url, agent_a[1])

    agent.call(0, "query_stock", {"sku": "A12"})

    spans = toolops_spans(otlp_http, 2)
    assert len(spans) == 2  # ToolOps' own spans still go out
    assert not [s for s in otlp_http.spans if s["scope"] != "toolops"]
