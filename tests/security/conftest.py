"""The abuse suite's shared ground: the console personas (agent A, agent B, reviewer,
support, operator, outsider, superuser), and a world with one object of every kind a
console page or form acts on, so that each abuse case names the object it goes after."""

# The console's personas are imported as fixtures, so test arguments shadow them.
# ruff: noqa: F811

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.contrib.admin.models import LogEntry
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone
from django_otp.plugins.otp_totp.models import TOTPDevice

from compensations.models import Compensation, Ticket, TicketEvent
from tests.compensations.conftest import dead_letter
from tests.console.conftest import (  # noqa: F401 - fixtures shared with the console tests
    PASSWORD,
    console_catalog,
    fast_password_hashing,
    logged_in,
    make_call,
    make_run,
    operator,
    outsider,
    reviewer,
    superuser,
    support,
)
from toolops.approvals.models import Approval, ApprovalVote
from toolops.audit.models import AuditEntry
from toolops.models import Agent, CircuitBreaker, Run, ToolCall, ToolPolicy
from toolops.notify.models import NotificationDelivery, NotificationEvent, NotificationPreference
from toolops.policy import versions
from toolops.policy.models import PolicyVersion
from traces.models import FullArgsRead

__all__ = ["PASSWORD", "World", "hold", "logged_in", "make_call", "make_run", "snapshot"]

ORDER = {"sku": "A12", "qty": 1, "amount": "199.00"}


def hold(
    run: Run,
    tool_call_id: str,
    tool: str = "send_notification",
    args: Any = None,
    *,
    step_index: int = 3,
    ttl_s: int = 1800,
    digest: str = "",
) -> Approval:
    """A call held for a reviewer, as the executor's gate leaves it."""
    call = make_call(
        run,
        tool_call_id,
        step_index,
        tool,
        "pending_approval",
        args=args if args is not None else {"to": "c-1", "message": "hello"},
        args_digest=digest or f"digest-{tool_call_id}",
    )
    approval = Approval.objects.create(
        run=run,
        tool=tool,
        reason="irreversible",
        args_hash=call.args_digest,
        expires_at=timezone.now() + timedelta(seconds=ttl_s),
    )
    call.approval = approval
    call.save(update_fields=["approval"])
    return approval


LOCKED = ("rita", "203.0.113.7")  # (username, address) of the world's locked login


@dataclass
class World:
    agent: Agent
    run: Run
    call: ToolCall
    unknown: ToolCall
    approval: Approval
    ticket: Ticket
    tool: str = "create_order"
    breaker_tool: str = "flaky_warehouse"


@pytest.fixture
def world(agent_a: tuple[Agent, str], console_catalog: Any) -> World:
    """Agent A's objects: a running run with a succeeded call, an unknown outcome and a
    held call; a dead-lettered compensation's ticket (in a run of its own); and a breaker
    that has tripped; an agent policy in force, and a proposed one."""
    agent = agent_a[0]
    run = make_run(agent, "r-world")
    call = make_call(
        run, "tc-done", 0, "create_order", "succeeded", args=ORDER, result={"order_id": "o-1"}
    )
    unknown = make_call(
        run,
        "tc-lost",
        1,
        "create_order",
        "unknown",
        args=ORDER,
        error_class="unknown",
        error_reason="timeout",
        error_message="orders service timed out",
        created_at=timezone.now() - timedelta(minutes=10),
    )
    approval = hold(run, "tc-held")
    ticket = dead_letter(agent, "r-dead")
    # The ticket's message to support's webhook, failed for good (the outbox's Send again).
    NotificationDelivery.objects.create(
        event=NotificationEvent.objects.get(kind="ticket_opened"),
        channel="webhook",
        target="support",
        status="failed",
    )
    # A login locked by repeated failures, for the operator's unlock.
    AccessAttempt.objects.create(
        username=LOCKED[0],
        ip_address=LOCKED[1],
        user_agent="guesser",
        failures_since_start=5,
        attempt_time=timezone.now(),
    )
    CircuitBreaker.objects.create(
        tool="flaky_warehouse",
        state=CircuitBreaker.State.OPEN,
        consecutive_failures=3,
        opened_at=timezone.now(),
        open_until=timezone.now() + timedelta(minutes=1),
    )
    # An agent policy in force that changes nothing, and another operator's proposal.
    versions.apply('default = "allow"\n', note="start", actor_name="ops")
    versions.apply('default = "deny"\n', note="lock down", actor_name="ops", propose=True)
    return World(agent, run, call, unknown, approval, ticket)


def snapshot(client: Client | None = None) -> tuple[Any, ...]:
    """Everything a console form can change, to show that a refused POST changed none."""

    def rows(model: Any, *fields: str) -> list[Any]:
        return list(model.objects.order_by("pk").values_list("pk", *fields))

    session = client.cookies.get("sessionid") if client is not None else None
    return (
        rows(Run, "status", "end_reason"),
        rows(ToolCall, "status", "error_message", "feedback"),
        rows(Approval, "status", "note"),
        rows(ApprovalVote, "decision"),
        rows(Ticket, "status", "assignee_id"),
        rows(TicketEvent, "kind"),
        rows(Compensation, "status", "rounds"),
        rows(ToolPolicy),
        rows(PolicyVersion, "number", "state"),
        rows(Agent, "rate_limit_per_minute"),
        rows(CircuitBreaker, "state", "forced", "open_until"),
        rows(NotificationPreference, "kind", "email"),
        rows(NotificationDelivery, "status"),
        LogEntry.objects.count(),
        FullArgsRead.objects.count(),
        AuditEntry.objects.count(),
        list(AccessAttempt.objects.order_by("pk").values_list("pk", "failures_since_start")),
        list(TOTPDevice.objects.filter(confirmed=True).values_list("pk", flat=True)),
        Session.objects.count(),
        session.value if session is not None else None,
    )
