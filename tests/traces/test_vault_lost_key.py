"""When the vault cannot give a call's full args or result back — sealed with a key this
process lacks (a worker on another host that made its own), or a row gone — nothing is
sent in their place: the stored forms hold placeholders ("[redacted email]") that a
downstream would take at their word. Each path of the executor ends, looks or undoes
accordingly, and people and the agent are told so instead of being shown placeholders."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from unittest.mock import patch

import pytest
from cryptography.fernet import Fernet
from django.utils import timezone
from rest_framework.test import APIClient

from compensations.models import Compensation, Ticket
from compensations.services import compensation_run_next
from tests.conftest import Shop
from tests.console.conftest import logged_in, make_user
from tests.toolops.api.helpers import body, create_run, post_call
from tests.traces.sensitive_fixtures import (
    SENSITIVE_ARGS,
    Echo,
    echo_fixture,  # noqa: F401
    echo_server_fixture,  # noqa: F401
)
from toolops.approvals.services import approval_decide
from toolops.executor.execution import Execution
from toolops.executor.replay import recover_stale_claim
from toolops.executor.settle import call_reconcile, call_settle
from toolops.models import Approval, IdempotencyRecord, ToolCall
from toolops.tasks import execute_approved_call

pytestmark = pytest.mark.django_db

SEALER, OTHER = Fernet.generate_key().decode(), Fernet.generate_key().decode()
LACKS_KEY = "could not be decrypted — TOOLOPS_ARGS_KEYS lacks the key they were sealed with"
NOT_SENT = f"its full args {LACKS_KEY}; nothing was sent"


@pytest.fixture(autouse=True)
def sealer(settings: Any) -> None:
    settings.TOOLOPS_ARGS_KEYS = [SEALER]


def another_host(settings: Any) -> None:
    """From here on, a process with a key of its own: it opens nothing sealed above."""
    settings.TOOLOPS_ARGS_KEYS = [OTHER]


def call(api: APIClient, step: int, tool: str, args: Any, expect: int = 200) -> dict[str, Any]:
    response = post_call(api, "r-key", step_index=step, tool=tool, args=args)
    assert response.status_code == expect, response.content
    return body(response)


def test_a_call_taken_over_ends_failed_and_sends_nothing(
    api: APIClient, echo: Echo, settings: Any
) -> None:
    create_run(api, "r-key")
    # The holder dies after its claim and call row committed, before anything was sent.
    died = patch.object(Execution, "run_attempts", autospec=True, side_effect=RuntimeError)
    with died, pytest.raises(RuntimeError):
        post_call(api, "r-key", step_index=0, tool="save_profile", args=SENSITIVE_ARGS)
    held = ToolCall.objects.get(tool="save_profile")
    IdempotencyRecord.objects.filter(key=held.idempotency_key).update(
        lease_until=timezone.now() - timedelta(seconds=1)
    )
    another_host(settings)

    recovered = recover_stale_claim(key=held.idempotency_key)

    assert recovered is not None
    assert echo.bodies("/echo") == []
    held.refresh_from_db()
    assert (held.status, held.error_class, held.attempts) == ("failed", "fatal", 0)
    assert held.error_message.startswith(NOT_SENT)
    assert "previous holder may have sent it" in held.error_message
    assert "nothing was sent" in held.feedback
    # Recorded like any ending: the key answers replays with it.
    record = IdempotencyRecord.objects.get(key=held.idempotency_key)
    assert record.state == IdempotencyRecord.State.RECORDED


def test_an_approved_call_ends_failed_and_sends_nothing(
    api: APIClient, shop: Shop, settings: Any, django_user_model: Any
) -> None:
    create_run(api, "r-key")
    args = {"order_id": "ord-7", "amount": "5.00", "card_number": "4111 1111 1111 1111"}
    held = call(api, 0, "charge", args, expect=202)
    reviewer = make_user(django_user_model, "rita", "reviewers")
    approval = Approval.objects.get(approval_id=held["approval"]["approval_id"])
    another_host(settings)

    # The reviewer is told, rather than shown placeholders as the args to be sent.
    page = logged_in(reviewer).get(held["approval"]["url"]).content.decode()
    assert "Its full args could not be decrypted" in page and "nothing is sent" in page
    assert "The full args, unredacted" not in page
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        approval_decide(
            approval=approval, by=reviewer, approve=True, note="ok", args_hash=approval.args_hash
        )

    assert execute_approved_call(approval.pk) == "failed"

    assert shop.requests("/payments/charges") == []
    row = ToolCall.objects.get(call_id=held["call_id"])
    assert row.error_class == "fatal" and row.error_message == NOT_SENT
    answer = body(api.get(f"/api/v1/calls/{held['call_id']}"))
    assert answer["status"] == "failed" and answer["error"]["message"] == NOT_SENT


def test_reconciliation_fails_its_look_and_the_call_stays_unknown(
    api: APIClient, echo: Echo, settings: Any
) -> None:
    create_run(api, "r-key")
    echo.plan("/pay", 502)  # an unsafe write: its outcome is unknown
    echo.plan("/find", 503, 503)  # and the look right after it fails
    paid = call(api, 0, "pay", SENSITIVE_ARGS)
    assert paid["status"] == "unknown"
    looks = len(echo.bodies("/find"))
    row = ToolCall.objects.get(call_id=paid["call_id"])
    ToolCall.objects.filter(pk=row.pk).update(next_reconcile_at=timezone.now())
    # A look for placeholders would find nothing, and "not found" would end it failed.
    echo.plan("/find", 404)
    another_host(settings)

    assert call_reconcile(call_pk=row.pk) == "unknown"

    assert len(echo.bodies("/find")) == looks  # no look was sent
    row.refresh_from_db()
    assert row.status == "unknown" and row.reconcile_attempts == 1
    assert row.next_reconcile_at is not None


def test_an_undo_dead_letters_into_a_ticket_and_sends_nothing(
    api: APIClient, echo: Echo, settings: Any
) -> None:
    create_run(api, "r-key")
    assert call(api, 0, "subscribe", SENSITIVE_ARGS)["status"] == "succeeded"
    compensation = Compensation.objects.get()
    another_host(settings)
    assert api.post("/api/v1/runs/r-key/abort", {"reason": "no"}, format="json").status_code == 202

    while compensation_run_next(run_pk=compensation.run_id):
        pass

    assert echo.bodies("/undo") == []
    compensation.refresh_from_db()
    assert compensation.status == Compensation.Status.DEAD_LETTERED
    assert f"compensation #{compensation.pk} (unsubscribe)" in compensation.last_error
    assert LACKS_KEY in compensation.last_error
    ticket = Ticket.objects.get(compensation=compensation)
    assert ticket.status == Ticket.Status.OPEN
    assert LACKS_KEY in ticket.events.latest("pk").text


def test_an_undo_that_cannot_be_mapped_opens_a_ticket_when_settled_by_a_person(
    api: APIClient, echo: Echo, settings: Any
) -> None:
    create_run(api, "r-key")
    done = call(api, 0, "subscribe", SENSITIVE_ARGS)
    # As if its outcome had been unknown, and a person now says it took effect.
    Compensation.objects.all().delete()
    ToolCall.objects.filter(call_id=done["call_id"]).update(status="unknown")
    row = ToolCall.objects.get(call_id=done["call_id"])
    another_host(settings)

    assert call_settle(call=row, by=None, succeeded=True, note="checked", result={"ok": 1})

    compensation = Compensation.objects.get()
    assert compensation.args == {}
    assert f"the full args of call {row.call_id} {LACKS_KEY}" in compensation.problem
    assert Ticket.objects.get(compensation=compensation).reason == Ticket.Reason.UNMAPPABLE


def test_the_agent_is_told_its_result_cannot_be_decrypted(
    api: APIClient, echo: Echo, settings: Any
) -> None:
    create_run(api, "r-key")
    saved = call(api, 0, "save_profile", SENSITIVE_ARGS)
    assert saved["result"]["received"] == SENSITIVE_ARGS and "result_error" not in saved
    another_host(settings)

    again = body(api.get(f"/api/v1/calls/{saved['call_id']}"))
    replayed = call(api, 0, "save_profile", SENSITIVE_ARGS)
    run = body(api.get("/api/v1/runs/r-key"))

    for answer in (again, replayed, run["calls"][0]):
        # Its status stands; its result is withheld, not given redacted as if real.
        assert answer["status"] == "succeeded" and answer["result"] is None
        assert answer["result_error"] == (
            "its full result could not be decrypted — TOOLOPS_ARGS_KEYS lacks the key it "
            "was sealed with"
        )
        assert "Do not call it again" in answer["feedback"]


def test_the_full_args_page_says_what_could_not_be_decrypted(
    api: APIClient, echo: Echo, settings: Any, django_user_model: Any
) -> None:
    create_run(api, "r-key")
    saved = call(api, 0, "save_profile", SENSITIVE_ARGS)
    superuser = django_user_model.objects.create_superuser(username="admin", password="x")
    another_host(settings)

    page = logged_in(superuser).get(f"/console/calls/{saved['call_id']}/args/").content.decode()

    assert f"Its full args {LACKS_KEY}: shown redacted." in page
    assert "Its full result could not be decrypted" in page
    assert "unredacted" not in page and "[redacted email]" in page
