"""The executor process dies (SIGKILL) after it claimed a call and sent the request, but
before it recorded the outcome. The downstream did act. After the claim's lease, the
identical call reaches another process: it must not re-send an unsafe write blindly —
it reconciles with the query tool, leaves the outcome unknown when there is none, and
only re-executes a write whose downstream honours our Idempotency-Key."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import httpx
from django.db.models.functions import Now

from tests.conftest import Shop
from tests.waiting import wait_until
from toolops.models import IdempotencyRecord, ToolCall

from .helpers import allow_without_approval, charge_noquery

CHARGE_ARGS = {"order_id": "ord-77", "amount": "199.00"}


class Agent:
    """The agent side: plain HTTP against the ToolOps servers."""

    def __init__(self, token: str) -> None:
        self.headers = {"Authorization": f"Bearer {token}"}

    def create_run(self, base_url: str, run_id: str) -> None:
        response = httpx.post(
            f"{base_url}/api/v1/runs", json={"run_id": run_id}, headers=self.headers, timeout=10
        )
        assert response.status_code == 201, response.text

    def call(self, base_url: str, run_id: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(
            f"{base_url}/api/v1/runs/{run_id}/calls", json=body, headers=self.headers, timeout=40
        )

    def call_in_background(self, base_url: str, run_id: str, body: dict[str, Any]) -> None:
        def send() -> None:
            with contextlib.suppress(httpx.HTTPError):  # the server is killed under it
                self.call(base_url, run_id, body)

        threading.Thread(target=send, daemon=True).start()


def crash_mid_call(
    toolops_server: Any, agent_a: Any, shop: Shop, path: str, body: dict[str, Any]
) -> tuple[Agent, Any]:
    """Send `body` to a first server, SIGKILL it once the shop has committed the request
    (its response is held back), and return the agent and a second server, after the dead
    holder's lease has run out."""
    first = toolops_server(TOOLOPS_CLAIM_LEASE_S="1")
    agent = Agent(agent_a[1])
    agent.create_run(first.url, "r-crash")
    shop.fault(path, hang_after_commit_s=8)

    agent.call_in_background(first.url, "r-crash", body)
    # The shop has committed it (its table has the row), and holds the answer back.
    table = path.rsplit("/", 1)[1]
    wait_until(lambda: shop.state()["counts"][table] == 1)
    assert len(shop.requests(path)) == 1
    first.kill()

    # The dead process left its claim and an in-progress call behind.
    record = IdempotencyRecord.objects.get()
    assert record.state == "claimed"
    assert ToolCall.objects.get().status == "in_progress"
    shop.fault(path)  # clear the hang: a re-sent request would be answered at once
    second = toolops_server(TOOLOPS_CLAIM_LEASE_S="1")
    # The lease is timed by the database clock: max(1 s, timeout_s + 1) = 3 s.
    wait_until(lambda: IdempotencyRecord.objects.filter(lease_until__lt=Now()).exists())
    return agent, second


def test_it_reconciles_a_dead_holders_charge_with_get_charge_instead_of_charging_again(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    allow_without_approval("charge")
    body = {"step_index": 5, "tool": "charge", "args": CHARGE_ARGS}
    agent, second = crash_mid_call(toolops_server, agent_a, shop, "/payments/charges", body)
    original = ToolCall.objects.get()
    [charge] = shop.state()["charges"]

    answer = agent.call(second.url, "r-crash", body)

    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "succeeded"
    assert answer.json()["replayed"] is True
    assert answer.json()["call_id"] == original.call_id
    assert answer.json()["result"]["charge_id"] == charge["charge_id"]
    assert answer.json()["error"] is None
    # Reconciled, not re-sent: one charge request, one charge, and a lookup by order_id.
    assert len(shop.requests("/payments/charges")) == 1
    assert shop.state()["counts"]["charges"] == 1
    lookups = shop.requests("/payments/charges/lookup")
    assert len(lookups) >= 1
    assert lookups[0]["body"]["order_id"] == "ord-77"
    record = IdempotencyRecord.objects.get()
    assert record.state == "recorded"
    assert record.fence == 2
    assert ToolCall.objects.get().status == "succeeded"

    again = agent.call(second.url, "r-crash", body)
    assert again.json()["call_id"] == original.call_id
    assert again.json()["status"] == "succeeded"
    assert len(shop.requests("/payments/charges")) == 1


def test_it_reconciles_a_dead_holders_charge_resent_with_its_tool_call_id(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    # An agent that retries after a crash sends the same tool_call_id again.
    allow_without_approval("charge")
    body = {"step_index": 5, "tool": "charge", "args": CHARGE_ARGS, "tool_call_id": "tc-pay"}
    agent, second = crash_mid_call(toolops_server, agent_a, shop, "/payments/charges", body)
    [charge] = shop.state()["charges"]

    answer = agent.call(second.url, "r-crash", {**body, "wait": 5})

    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "succeeded", answer.json()
    assert answer.json()["tool_call_id"] == "tc-pay"
    assert answer.json()["result"]["charge_id"] == charge["charge_id"]
    assert len(shop.requests("/payments/charges")) == 1
    assert shop.state()["counts"]["charges"] == 1


def test_it_leaves_a_dead_holders_charge_unknown_when_there_is_no_query_tool(
    toolops_server: Any, agent_a: Any, shop: Shop, catalog: Any
) -> None:
    catalog(charge_noquery())
    body = {"step_index": 5, "tool": "charge_noquery", "args": CHARGE_ARGS}
    agent, second = crash_mid_call(toolops_server, agent_a, shop, "/payments/charges", body)

    answer = agent.call(second.url, "r-crash", body)

    assert answer.status_code == 200, answer.text
    call = answer.json()
    assert call["status"] == "unknown"
    assert call["error"]["class"] == "unknown"
    assert "do not retry" in call["feedback"].lower()
    assert call["result"] is None
    # Nothing was re-sent: the one charge stands, and no lookup exists to ask.
    assert len(shop.requests("/payments/charges")) == 1
    assert shop.state()["counts"]["charges"] == 1
    assert ToolCall.objects.get().status == "unknown"

    again = agent.call(second.url, "r-crash", body)
    assert again.json()["status"] == "unknown"
    assert len(shop.requests("/payments/charges")) == 1


def test_it_re_executes_a_dead_holders_reservation_under_the_same_idempotency_key(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    body = {"step_index": 1, "tool": "reserve_stock", "args": {"sku": "A12", "qty": 2}}
    agent, second = crash_mid_call(toolops_server, agent_a, shop, "/inventory/reservations", body)
    [reservation] = shop.state()["reservations"]

    answer = agent.call(second.url, "r-crash", body)

    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "succeeded"
    assert answer.json()["result"]["reservation_id"] == reservation["reservation_id"]
    # Re-sent (the downstream honours Idempotency-Key), and replayed there: one reservation.
    sent = shop.requests("/inventory/reservations")
    assert len(sent) == 2
    keys = {r["headers"]["idempotency-key"] for r in sent}
    assert len(keys) == 1
    assert keys == {ToolCall.objects.get().idempotency_key}
    state = shop.state()
    assert state["counts"]["reservations"] == 1
    assert state["stock"]["A12"] == 48
