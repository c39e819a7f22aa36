"""toolops.client against a real ToolOps server and the shop over HTTP: the run's context
manager completes or aborts as it says, calls come back as Call objects whatever their
outcome, a retry after a lost response is the same call, waiting for a person is a
long-poll with a timeout, and the API's refusals are typed errors with its message."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, Shop
from tests.console.conftest import make_user
from tests.toolops.api.test_run_get import add_calls
from toolops.approvals.services import approval_decide
from toolops.client import AsyncToolOps, BadRequest, InvalidId, NotFound, ToolOps, Unauthorized
from toolops.client.sync import Run as ClientRun
from toolops.models import Approval, Run

RESERVE = {"sku": "A12", "qty": 1}


@pytest.fixture
def server(toolops_server: Any) -> Any:
    return toolops_server()


def test_a_run_completes_when_its_block_ends(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    with ToolOps(server.url, agent_a[1]) as client, client.run(session_key="conv-1") as run:
        stock = run.call("query_stock", {"sku": "A12"})
        reserved = run.call("reserve_stock", RESERVE, depends_on=[stock.tool_call_id])

    assert (stock.status, reserved.status) == ("succeeded", "succeeded")
    assert stock.ok and reserved.result["reservation_id"]
    row = Run.objects.get(run_id=run.run_id)
    assert row.status == "completed" and row.session_key == "conv-1"
    assert [c.step_index for c in row.calls.order_by("step_index")] == [0, 1]


def test_a_run_is_aborted_with_the_errors_text_when_its_block_raises(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    client = ToolOps(server.url, agent_a[1])
    with pytest.raises(RuntimeError, match="the model gave up"), client.run() as run:
        run.call("reserve_stock", RESERVE)
        raise RuntimeError("the model gave up")

    row = Run.objects.get(run_id=run.run_id)
    assert row.status in ("aborting", "aborted")
    assert "RuntimeError: the model gave up" in row.end_reason


def test_a_failed_tool_is_a_call_with_feedback_not_an_exception(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    shop.fault("/inventory/reservations", fail_next=1, fail_status=409)
    with ToolOps(server.url, agent_a[1]) as client, client.run() as run:
        call = run.call("reserve_stock", RESERVE)

    assert call.status == "failed" and not call.ok
    assert call.error["class"] == "fatal"
    assert call.feedback


class LoseFirstResponse(httpx.HTTPTransport):
    """The request reaches ToolOps and is executed; its answer is lost on the way back."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.method == "POST" and request.url.path.endswith("/calls") and not self.lost:
            self.lost += 1
            response.read()
            raise httpx.ReadError("connection reset", request=request)
        return response


def test_a_call_whose_answer_is_lost_is_sent_again_as_the_same_call(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    transport = LoseFirstResponse()
    with ToolOps(server.url, agent_a[1], transport=transport) as client, client.run() as run:
        call = run.call("reserve_stock", RESERVE)

    assert transport.lost == 1
    assert call.status == "succeeded" and call.replayed
    assert len(shop.requests("/inventory/reservations")) == 1
    assert len(shop.state()["reservations"]) == 1


def test_waiting_for_a_person_is_a_long_poll_with_a_timeout(
    server: Any, agent_a: tuple[Any, str], shop: Shop, django_user_model: Any
) -> None:
    rita = make_user(django_user_model, "rita", "reviewers")
    client = ToolOps(server.url, agent_a[1])
    run = client.open_run()
    held = run.call("charge", {"order_id": "ord-1", "amount": "9.50"})
    assert held.waiting and held.approval["status"] == "pending"

    assert run.wait(held, timeout=0.5).status == "pending_approval"

    def reject() -> None:
        approval = Approval.objects.get()
        approval_decide(
            approval=approval,
            by=rita,
            approve=False,
            note="not today",
            args_hash=approval.args_hash,
        )

    timer = threading.Timer(0.5, reject)
    timer.start()
    decided = run.wait(held, timeout=20)
    timer.join()

    assert decided.status == "rejected" and "not today" in decided.feedback
    assert shop.requests("/payments/charges") == []


def test_the_apis_refusals_are_typed_errors_with_its_message(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    with pytest.raises(Unauthorized):
        ToolOps(server.url, "not-a-token").tools()
    client = ToolOps(server.url, agent_a[1])
    with client.run() as run:
        with pytest.raises(BadRequest, match="step_index"):
            run.call("query_stock", {"sku": "A12"}, step_index=-1)
        with pytest.raises(NotFound):
            client.call_get("c-nosuchcall")
    assert {t["name"] for t in client.tools()} >= {"query_stock", "reserve_stock"}


def test_the_async_client_does_the_same(server: Any, agent_a: tuple[Any, str], shop: Shop) -> None:
    async def agent() -> tuple[str, str]:
        async with AsyncToolOps(server.url, agent_a[1]) as client:
            async with client.run() as run:
                call = await run.call("query_stock", {"sku": "A12"})
                again = await run.call(
                    "query_stock", {"sku": "A12"}, step_index=0, tool_call_id=call.tool_call_id
                )
                assert again.replayed and again.call_id == call.call_id
            return run.run_id, call.status

    run_id, status = asyncio.run(agent())

    assert status == "succeeded"
    assert Run.objects.get(run_id=run_id).status == "completed"


def test_it_imports_without_django_settings() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO")}
    code = "from toolops.client import ToolOps; ToolOps('http://127.0.0.1:1', 'token').close()"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True)
    assert done.returncode == 0, done.stderr


def test_a_reopened_long_run_counts_and_follows_all_its_calls(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    with ToolOps(server.url, agent_a[1]) as client:
        add_calls(Run.objects.get(run_id=client.open_run(run_id="r-long").run_id), 1001)

        run = client.open_run(run_id="r-long")

        assert len(run.data["calls"]) == 1000
        assert run.next_step == 1001  # the step after every call, not after the first page
        assert [c["step_index"] for c in run.calls()] == list(range(1001))


def test_the_async_client_follows_a_long_runs_pages(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    async def main() -> list[Any]:
        async with AsyncToolOps(server.url, agent_a[1]) as client:
            run = await client.open_run(run_id="r-long")
            assert run.next_step == 1001
            return await run.calls()

    with ToolOps(server.url, agent_a[1]) as client:
        add_calls(Run.objects.get(run_id=client.open_run(run_id="r-long").run_id), 1001)

    assert len(asyncio.run(main())) == 1001


@pytest.mark.parametrize("bad", ["r-1\n", "r-1 ", " r-1", "r/1", "r?1", "", "x" * 129])
def test_it_refuses_an_id_the_api_would_refuse_before_sending_anything(bad: str) -> None:
    # Nothing listens on port 1: an InvalidId, not a connection error, shows nothing was sent.
    client = ToolOps("http://127.0.0.1:1", "token")
    run = ClientRun(client, {"run_id": "r-1"})
    with pytest.raises(InvalidId, match="run_id"):
        client.run_create(run_id=bad)
    with pytest.raises(InvalidId, match="session_key"):
        client.run_create(session_key=bad)
    with pytest.raises(InvalidId, match="tool_call_id"):
        run.call("query_stock", {}, tool_call_id=bad)
    with pytest.raises(InvalidId, match="depends_on"):
        run.call("query_stock", {}, depends_on=["tc-1", bad])
    with pytest.raises(InvalidId, match="call_id"):
        client.call_get(bad)
    client.close()


@pytest.mark.parametrize("bad", ["query_stock\n", " query_stock", "query stock", "x" * 65, ""])
def test_it_refuses_a_tool_name_outside_the_rule_before_sending_anything(bad: str) -> None:
    client = ToolOps("http://127.0.0.1:1", "token")
    with pytest.raises(InvalidId, match="tool name"):
        ClientRun(client, {"run_id": "r-1"}).call(bad, {})
    client.close()
