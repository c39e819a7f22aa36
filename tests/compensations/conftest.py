"""Fixtures for the saga and the support desk: a run whose undo was dead-lettered, with
its ticket, built through the services the worker uses."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from unittest.mock import MagicMock, patch

import pytest

from compensations.models import Compensation, Ticket
from compensations.services import compensation_finish
from tests.console.conftest import (  # noqa: F401 - fixtures shared with the console tests
    console_catalog,
    fast_password_hashing,
    make_attempt,
    make_call,
    make_run,
    operator,
    outsider,
    reviewer,
    superuser,
    support,
)
from toolops.models import Agent, ToolCall


def dead_letter(
    agent: Agent,
    run_id: str = "r-dl",
    *,
    tool: str = "cancel_order",
    args: dict[str, Any] | None = None,
    error: str = "503 Service Unavailable",
) -> Ticket:
    """An aborting run whose one compensation failed all its attempts: the worker's own
    finish step opens the ticket and the run ends compensation_failed."""
    from compensations.services import run_conclude

    run = make_run(agent, run_id, status="aborting")
    order = make_call(
        run,
        f"tc-{run_id}",
        0,
        "create_order",
        "succeeded",
        args={"sku": "A12", "qty": 1, "amount": "19.90"},
        result={"order_id": "o-1"},
    )
    compensation = Compensation.objects.create(
        run=run,
        call=order,
        tool=tool,
        args=args or {"order_id": "o-1"},
        key="k" * 64,
        status=Compensation.Status.RUNNING,
        rounds=1,
    )
    undo = make_call(
        run,
        f"~undo:{order.call_id}:1",
        0,
        tool,
        "failed",
        role=ToolCall.Role.UNDO,
        attempts=3,
        error_class="retry",
        error_reason="downstream_error",
        error_message=error,
    )
    for number in (1, 2, 3):
        make_attempt(
            undo,
            number,
            tool=tool,
            outcome="retry",
            http_status=503,
            error=error,
            downstream_request_id=f"req-{run_id}-{number}",
        )
    compensation_finish(compensation=compensation, undo=undo)
    run_conclude(run_pk=run.pk)
    return Ticket.objects.get(compensation=compensation)


@pytest.fixture
def ticket(agent_a: tuple[Agent, str]) -> Ticket:
    return dead_letter(agent_a[0])


@pytest.fixture
def lost_messages() -> Iterator[MagicMock]:
    """This process's enqueues go nowhere: an abort or a retry made in-process is a lost
    message, and only the worker's sweep can find its work."""
    from compensations.tasks import compensate_run

    with patch.object(compensate_run, "delay", autospec=True) as delay:
        yield delay
