"""The audit log (toolops/audit/): each human action writes exactly one entry, in the
action's transaction, naming the person and the object as text that outlives both; an
action refused or rolled back writes none; entries are never edited or deleted."""

# The console's personas are imported as fixtures, so test arguments shadow them.
# ruff: noqa: F811

from __future__ import annotations

from io import StringIO
from typing import Any
from unittest.mock import patch

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import transaction

from compensations import desk
from compensations.models import Ticket
from tests.compensations.conftest import dead_letter
from tests.console.conftest import (  # noqa: F401 - fixtures shared with the console tests
    console_catalog,
    fast_password_hashing,
    make_call,
    make_run,
    operator,
    reviewer,
    superuser,
    support,
)
from tests.toolops.approvals.test_console import hold
from toolops.approvals.services import DecisionRefused, approval_decide
from toolops.audit.models import AppendOnly, AuditEntry
from toolops.audit.services import Action, NotInTransaction, Ref, audit_record
from toolops.models import Agent, Run
from traces.audit import full_args_read
from traces.models import FullArgsRead

pytestmark = pytest.mark.django_db

CARD = "4111 1111 1111 1111"


def only(action: str) -> AuditEntry:
    """The one entry of `action` (fails when there are none or several)."""
    return AuditEntry.objects.get(action=action)


def test_it_lists_every_action_of_api_md() -> None:
    # API.md "Processes and settings": decide, abort, settle, ticket assign/comment/retry/
    # resolve, breaker force/reset, policy edit, full-args read, token create/rotate/
    # revoke, login lockout and unlock; and beyond it, an agent's rate limit, a ticket's
    # snooze, the console's webhooks, and the agent policy's versions ("policy edit" is a
    # tool's policy in the console; API.md "Agent policy": every apply and rollback).
    beyond = {
        "agent.rate_limit",
        "ticket.snooze",
        "webhook.add",
        "webhook.test",
        "webhook.remove",
        "policy.apply",
        "policy.rollback",
        "policy.propose",
        "policy.confirm",
        "policy.withdraw",
    }
    assert set(Action.values) == beyond | {
        "approval.decide",
        "run.abort",
        "call.settle",
        "ticket.assign",
        "ticket.comment",
        "ticket.retry",
        "ticket.resolve",
        "breaker.force_open",
        "breaker.reset",
        "policy.edit",
        "full_args.read",
        "token.create",
        "token.rotate",
        "token.revoke",
        "login.lockout",
        "login.unlock",
    }


def test_it_records_who_what_and_the_objects_link(operator: Any, agent_a: Any) -> None:
    operator.first_name, operator.last_name = "Olga", "Ops"
    operator.save()
    run = make_run(agent_a[0], "r-link")

    with transaction.atomic():
        entry = audit_record(
            actor=operator,
            action=Action.RUN_ABORT,
            obj=run,
            summary="Aborted",
            detail={"reason": "customer called"},
        )

    entry.refresh_from_db()
    assert (entry.actor, entry.actor_username, entry.actor_name) == (operator, "olga", "Olga Ops")
    assert (entry.object_type, entry.object_id) == ("run", "r-link")
    assert entry.object_url == f"/console/runs/{run.pk}/"
    assert entry.detail == {"reason": "customer called"} and entry.summary == "Aborted"
    assert entry.at is not None  # the database's clock


def test_it_names_an_object_without_a_row(operator: Any) -> None:
    with transaction.atomic():
        entry = audit_record(
            actor=None,
            action=Action.LOGIN_LOCKOUT,
            obj=Ref("user", "mallory"),
            detail={"failures": 5},
        )

    assert (entry.actor_id, entry.actor_username) == (None, "")
    assert (entry.object_type, entry.object_id, entry.object_url) == ("user", "mallory", "")


def test_it_redacts_what_a_detail_or_summary_could_carry(operator: Any) -> None:
    with transaction.atomic():
        entry = audit_record(
            actor=operator,
            action=Action.POLICY_EDIT,
            obj=Ref("policy", "charge"),
            detail={"api_key": "sk-live-123456", "note": f"card {CARD}, ann@example.com"},
            summary=f"card {CARD}, ann@example.com",
        )

    entry.refresh_from_db()
    assert entry.detail["api_key"] == "[redacted]"
    assert CARD not in entry.detail["note"] and "ann@example.com" not in entry.detail["note"]
    assert CARD not in entry.summary and "ann@example.com" not in entry.summary


def test_it_refuses_an_unknown_action(operator: Any) -> None:
    with transaction.atomic(), pytest.raises(ValueError, match="unknown audit action"):
        audit_record(actor=operator, action="run.delete")
    assert not AuditEntry.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_it_refuses_to_write_outside_the_actions_transaction(operator: Any) -> None:
    with pytest.raises(NotInTransaction):
        audit_record(actor=operator, action=Action.RUN_ABORT)
    assert not AuditEntry.objects.exists()


def test_an_action_rolled_back_leaves_no_entry(operator: Any) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        audit_record(actor=operator, action=Action.BREAKER_RESET, obj=Ref("breaker", "x"))
        raise RuntimeError("the action failed after its entry was written")

    assert not AuditEntry.objects.exists()


def test_an_entry_is_never_saved_again_or_deleted(operator: Any) -> None:
    with transaction.atomic():
        entry = audit_record(actor=operator, action=Action.RUN_ABORT, summary="as it was")

    entry.summary = "rewritten"
    with pytest.raises(AppendOnly):
        entry.save()
    with pytest.raises(AppendOnly):
        entry.delete()
    with pytest.raises(AppendOnly):
        AuditEntry.objects.filter(pk=entry.pk).update(summary="rewritten")
    with pytest.raises(AppendOnly):
        AuditEntry.objects.all().delete()
    assert AuditEntry.objects.get().summary == "as it was"


# -- the actions, through their services -----------------------------------------------------


def test_a_decision_is_one_entry_and_a_refused_one_none(
    reviewer: Any, agent_a: Any, console_catalog: Any
) -> None:
    approval = hold(make_run(agent_a[0], "r-dec"), "tc-dec")

    with pytest.raises(DecisionRefused):
        approval_decide(approval=approval, by=reviewer, approve=True, note="", args_hash="other")
    assert not AuditEntry.objects.filter(action=Action.APPROVAL_DECIDE).exists()
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        approval_decide(
            approval=approval,
            by=reviewer,
            approve=False,
            note=f"wrong card {CARD}",
            args_hash=approval.args_hash,
        )

    entry = only(Action.APPROVAL_DECIDE)
    assert (entry.actor, entry.object_id) == (reviewer, approval.approval_id)
    assert entry.object_url == f"/console/approvals/{approval.approval_id}/"
    assert entry.detail["decision"] == "reject" and entry.detail["args_hash"] == "digest-tc-dec"
    assert CARD not in entry.detail["note"] and CARD not in entry.summary


def test_each_ticket_action_is_one_entry(support: Any, agent_a: Any) -> None:
    ticket = dead_letter(agent_a[0])
    link = f"/console/tickets/{ticket.pk}/"

    desk.ticket_assign(ticket=ticket, by=support, to=support)
    desk.ticket_comment(ticket=ticket, by=support, text="Called the shop.")
    with patch("compensations.tasks.compensate_run.delay", autospec=True):
        desk.ticket_retry(ticket=ticket, by=support)
    done = dead_letter(agent_a[0], "r-dl2")
    desk.ticket_resolve(ticket=done, by=support, note="Cancelled by hand in the shop.")

    entries = list(AuditEntry.objects.order_by("id").filter(object_type="ticket"))
    assert [e.action for e in entries] == [
        "ticket.assign",
        "ticket.comment",
        "ticket.retry",
        "ticket.resolve",
    ]
    assert {e.actor for e in entries} == {support}
    assert [e.object_url for e in entries[:3]] == [link] * 3
    assert entries[0].detail == {"to": "sam"}
    assert entries[1].summary == "Called the shop."
    assert entries[3].detail == {"note": "Cancelled by hand in the shop."}


def test_a_refused_ticket_action_writes_no_entry(support: Any, agent_a: Any) -> None:
    ticket = dead_letter(agent_a[0])
    desk.ticket_resolve(ticket=ticket, by=support, note="Settled by hand.")
    before = AuditEntry.objects.count()

    with pytest.raises(desk.TicketActionRefused):
        desk.ticket_resolve(ticket=ticket, by=support, note="Again.")
    with pytest.raises(desk.TicketActionRefused):
        desk.ticket_retry(ticket=Ticket.objects.get(pk=ticket.pk), by=support)
    with pytest.raises(desk.TicketActionRefused):
        desk.ticket_comment(ticket=ticket, by=support, text="   ")

    assert AuditEntry.objects.count() == before


def test_a_look_at_full_args_is_one_entry(operator: Any, agent_a: Any) -> None:
    call = make_call(
        make_run(agent_a[0], "r-look"),
        "tc-look",
        0,
        "create_order",
        "succeeded",
        args={"sku": "A12"},
    )

    full_args_read(call=call, user=operator, purpose="console")

    entry = only(Action.FULL_ARGS_READ)
    assert (entry.actor, entry.object_id, entry.detail["purpose"]) == (
        operator,
        call.call_id,
        "console",
    )
    assert not FullArgsRead.objects.exists()  # the old trail is no longer written


def test_creating_an_agent_audits_its_token_but_never_stores_it() -> None:
    out = StringIO()

    call_command("create_agent", "billing-bot", stdout=out)

    token = out.getvalue().strip().splitlines()[-1]
    agent = Agent.objects.get(name="billing-bot")
    entry = only(Action.TOKEN_CREATE)
    assert (entry.object_type, entry.object_id) == ("agent", "billing-bot")
    assert entry.detail["hint"] == agent.token_hint
    assert entry.detail["via"].startswith("manage.py create_agent")
    assert token not in str(entry.detail) and token not in entry.summary


def test_a_policy_saved_in_admin_is_one_entry(superuser: Any, console_catalog: Any) -> None:
    from django.test import Client

    client = Client()
    client.force_login(superuser)
    response = client.post(
        "/admin/toolops/toolpolicy/add/", {"tool": "create_order", "timeout_s": "2.5"}
    )

    assert response.status_code == 302
    entry = only(Action.POLICY_EDIT)
    assert (entry.actor, entry.object_id) == (superuser, "create_order")
    assert "timeout_s: default → 2.5" in entry.summary


# -- the trails it replaces, copied by the migration ----------------------------------------


def test_the_migration_copies_the_old_trails(operator: Any, agent_a: Any) -> None:
    from importlib import import_module

    from django.apps import apps

    migration = import_module("toolops.migrations.0012_audit_log")
    run = make_run(agent_a[0], "r-old", status=Run.Status.ABORTED)
    LogEntry.objects.log_actions(
        user_id=operator.pk,
        queryset=[run],
        action_flag=CHANGE,
        change_message="Aborted (running → aborted): duplicate order",
        single_object=True,
    )
    FullArgsRead.objects.create(user=operator, call_ref="c-gone", purpose="console")
    assert ContentType.objects.get_for_model(Run).model == "run"

    migration.copy_trails(apps, None)

    abort, read = AuditEntry.objects.exclude(action="token.create").order_by("at", "id")
    assert (abort.action, abort.actor, abort.object_id) == ("run.abort", operator, "r-old")
    assert abort.summary == "Aborted (running → aborted): duplicate order"
    assert abort.object_url == f"/console/runs/{run.pk}/"
    assert (read.action, read.actor_username, read.object_id) == (
        "full_args.read",
        "olga",
        "c-gone",
    )
