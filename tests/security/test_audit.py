"""Abuse cases of the audit log (issue 15 item 6): rewriting or erasing what a person
did, through raw SQL, the admin, account deletion or retention; reading it without being
an operator; breaking its page with a bad filter or with markup in what it records."""

# The console's personas are imported as fixtures, so test arguments shadow them.
# ruff: noqa: F811

from __future__ import annotations

from datetime import timedelta
from typing import Any
from unittest.mock import patch

import pytest
from django.db import IntegrityError, connection, transaction
from django.test import RequestFactory
from django.utils import timezone

from compensations import desk
from compensations.models import Ticket
from tests.compensations.conftest import dead_letter
from tests.console.conftest import (  # noqa: F401 - fixtures shared with the console tests
    console_catalog,
    fast_password_hashing,
    logged_in,
    make_call,
    make_record,
    make_run,
    operator,
    outsider,
    reviewer,
    superuser,
    support,
)
from tests.toolops.approvals.test_console import hold
from toolops.approvals.services import approval_decide
from toolops.audit.models import AuditEntry
from toolops.audit.services import Action, Ref, audit_record
from toolops.models import Run
from traces.retention import retention_purge

pytestmark = pytest.mark.django_db

CARD = "4111 1111 1111 1111"


def record(actor: Any, action: str = Action.RUN_ABORT, **fields: Any) -> AuditEntry:
    with transaction.atomic():
        return audit_record(actor=actor, action=action, **fields)


def raw(sql: str, params: list[Any]) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


# -- rewriting or erasing the log -----------------------------------------------------------


def test_it_refuses_a_raw_sql_update_of_an_entry(operator: Any) -> None:
    entry = record(operator, summary="Aborted: duplicate order")

    with pytest.raises(IntegrityError, match="append-only"):
        raw("UPDATE toolops_auditentry SET summary = %s WHERE id = %s", ["nothing", entry.pk])

    assert AuditEntry.objects.get().summary == "Aborted: duplicate order"


def test_it_refuses_a_raw_sql_delete_of_an_entry(operator: Any) -> None:
    entry = record(operator)

    with pytest.raises(IntegrityError, match="append-only"):
        raw("DELETE FROM toolops_auditentry WHERE id = %s", [entry.pk])

    assert AuditEntry.objects.filter(pk=entry.pk).exists()


def test_it_refuses_a_rewrite_disguised_as_an_account_deletion(operator: Any) -> None:
    # The one UPDATE let through sets actor_id to NULL and nothing else.
    entry = record(operator)

    with pytest.raises(IntegrityError, match="append-only"):
        raw(
            "UPDATE toolops_auditentry SET actor_id = NULL, actor_username = '' WHERE id = %s",
            [entry.pk],
        )

    assert AuditEntry.objects.get().actor_username == "olga"


def test_deleting_a_user_keeps_the_entries_naming_them(django_user_model: Any) -> None:
    from tests.console.conftest import make_user

    gone = make_user(django_user_model, "gary", "operators", first_name="Gary")
    entry = record(gone, Action.BREAKER_FORCE_OPEN, obj=Ref("breaker", "charge"))

    gone.delete()

    entry.refresh_from_db()
    assert (entry.actor_id, entry.actor_username, entry.actor_name) == (None, "gary", "Gary")
    assert entry.actor_gone


def test_retention_keeps_a_decision_after_its_run_and_its_reviewer_are_gone(
    reviewer: Any, agent_a: Any, console_catalog: Any
) -> None:
    run = make_run(agent_a[0], "r-old")
    approval = hold(run, "tc-old")
    approval_decide(
        approval=approval,
        by=reviewer,
        approve=False,
        note="Wrong customer.",
        args_hash=approval.args_hash,
    )
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.COMPLETED, ended_at=timezone.now() - timedelta(days=40)
    )

    counts = retention_purge(days=30)
    # The run went with its approval and the vote that protected the reviewer's account.
    reviewer.delete()

    assert counts["toolops.Run"] == 1 and not Run.objects.filter(pk=run.pk).exists()
    entry = AuditEntry.objects.get(action=Action.APPROVAL_DECIDE)
    assert (entry.actor_id, entry.actor_username, entry.object_id) == (
        None,
        "rita",
        approval.approval_id,
    )
    assert entry.detail["note"] == "Wrong customer."


# -- the admin ------------------------------------------------------------------------------


@pytest.fixture
def admin_rows(agent_a: Any, superuser: Any) -> dict[str, Any]:
    run = make_run(agent_a[0], "r-adm")
    call = make_call(run, "tc-adm", 0, "charge", "succeeded", idempotency_key="e" * 64)
    return {
        "idempotencyrecord": make_record(call),
        "toolcall": call,
        "run": run,
        "auditentry": record(superuser),
    }


@pytest.mark.parametrize("model", ["idempotencyrecord", "toolcall", "run", "auditentry"])
def test_a_superuser_cannot_delete_a_record_in_the_admin(
    superuser: Any, admin_rows: dict[str, Any], model: str
) -> None:
    row = admin_rows[model]
    client = logged_in(superuser)
    url = f"/admin/toolops/{model}/{row.pk}/delete/"

    assert client.get(url).status_code == 403
    assert client.post(url, {"post": "yes"}).status_code == 403
    listing = client.get(f"/admin/toolops/{model}/")
    assert "delete_selected" not in listing.content.decode()
    bulk = {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"}
    client.post(f"/admin/toolops/{model}/", bulk)

    assert type(row).objects.filter(pk=row.pk).exists()


def test_a_superuser_cannot_add_or_edit_an_audit_entry_in_the_admin(
    superuser: Any, admin_rows: dict[str, Any]
) -> None:
    entry = admin_rows["auditentry"]
    client = logged_in(superuser)

    assert client.get("/admin/toolops/auditentry/").status_code == 200
    assert client.get("/admin/toolops/auditentry/add/").status_code == 403
    response = client.post(
        f"/admin/toolops/auditentry/{entry.pk}/change/", {"summary": "nothing happened"}
    )

    assert response.status_code == 403
    assert AuditEntry.objects.get(pk=entry.pk).summary == entry.summary


# -- reading it -----------------------------------------------------------------------------


@pytest.mark.parametrize("persona", ["reviewer", "support", "outsider"])
def test_a_non_operator_cannot_read_the_audit_log(
    request: Any, operator: Any, persona: str
) -> None:
    record(operator, summary="Aborted: secret plans")

    response = logged_in(request.getfixturevalue(persona)).get("/console/audit/")

    assert response.status_code == 403
    assert "secret plans" not in response.content.decode()


@pytest.mark.parametrize(
    "query",
    [
        "since=2026-02-30",
        "until=99999-01-01",
        "since=%00",
        "action=%27%3B%20DROP%20TABLE",
        "before=1e9",
        "before=-5",
        f"before={10**40}",
        f"actor={'a' * 10_000}",
        "since=2026-03-09&until=2026-03-01",
    ],
)
def test_a_bad_audit_filter_is_a_clear_400_not_a_500(operator: Any, query: str) -> None:
    response = logged_in(operator).get(f"/console/audit/?{query}")

    assert response.status_code == 400
    assert 'class="msg-error"' in response.content.decode()


# -- what it records ------------------------------------------------------------------------


def test_a_failed_action_writes_no_entry(support: Any, agent_a: Any) -> None:
    ticket = dead_letter(agent_a[0])

    # The retry fails after its entry was written (the broker is down): all or nothing.
    down = ConnectionError("broker down")
    with (
        patch("toolops.executor.compensations_wake", side_effect=down),
        pytest.raises(ConnectionError),
    ):
        desk.ticket_retry(ticket=ticket, by=support)

    assert not AuditEntry.objects.filter(action=Action.TICKET_RETRY).exists()
    assert Ticket.objects.get(pk=ticket.pk).compensation.status == "dead_lettered"


def test_a_card_number_in_a_note_is_stored_redacted(support: Any, agent_a: Any) -> None:
    ticket = dead_letter(agent_a[0])

    desk.ticket_resolve(ticket=ticket, by=support, note=f"Refunded to card {CARD}.")

    entry = AuditEntry.objects.get(action=Action.TICKET_RESOLVE)
    assert CARD not in entry.summary and CARD not in str(entry.detail)
    assert "[redacted card]" in entry.summary


def test_markup_in_an_entry_is_shown_as_text(operator: Any) -> None:
    record(
        operator,
        summary='<img src=x onerror="alert(1)">',
        obj=Ref("run", "<b>r-1</b>", "/console/runs/1/"),
    )

    page = logged_in(operator).get("/console/audit/").content.decode()

    assert "<img src=x" not in page and "&lt;img src=x" in page
    assert "<b>r-1</b>" not in page


def test_a_link_that_is_not_a_site_path_is_not_rendered(operator: Any) -> None:
    record(operator, obj=Ref("run", "r-js", "javascript:alert(1)"))
    record(operator, obj=Ref("run", "r-far", "//evil.example/phish"))

    page = logged_in(operator).get("/console/audit/").content.decode()

    assert "javascript:" not in page and "evil.example" not in page
    assert "<code>r-js</code>" in page and "<code>r-far</code>" in page


def test_a_forwarded_for_header_does_not_set_the_recorded_address(operator: Any) -> None:
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.7", HTTP_X_FORWARDED_FOR="203.0.113.9")

    entry = record(operator, request=request)

    assert AuditEntry.objects.get(pk=entry.pk).address == "10.0.0.7"
