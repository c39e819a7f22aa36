"""An e-mail address, a card number (with spaces) and an API key sent in args — and echoed
back by the downstream in its result and its errors — never appear in a stored row, a
console page, a log line or an error message; the agent still gets its full result, and
every path that sends the call again (retry, takeover, reconciliation, approval, undo)
sends the full args. Real PostgreSQL, real downstreams over HTTP."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any
from unittest.mock import patch

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from compensations.models import Compensation
from compensations.services import compensation_run_next
from tests.conftest import Shop
from tests.console.conftest import logged_in, make_user
from tests.toolops.api.helpers import body, create_run, post_call
from tests.traces.sensitive_fixtures import (
    API_KEY,
    CARD,
    EMAIL,
    IBAN,
    SENSITIVE_ARGS,
    Echo,
    echo_fixture,  # noqa: F401
    echo_server_fixture,  # noqa: F401
    leaks,
)
from toolops.approvals.services import approval_decide
from toolops.executor.execution import Execution
from toolops.executor.replay import recover_stale_claim
from toolops.executor.settle import call_reconcile
from toolops.models import Approval, AuditEntry, IdempotencyRecord, Run, ToolCall
from toolops.tasks import execute_approved_call
from traces.models import SealedArgs
from traces.sensitive import RedactingFilter

pytestmark = pytest.mark.django_db

READS = AuditEntry.objects.filter(action="full_args.read")

PROFILE = {
    **SENSITIVE_ARGS,
    "nickname": "annie-the-great",  # redacted by the catalog's `redact`
    "address": {"street": "12 Harbour Lane", "city": "Oslo"},  # "address.street" too
    "notes": f"write to {EMAIL} first",
}
CATALOG_SECRETS = ("annie-the-great", "12 Harbour Lane")


def stored_text() -> str:
    """Every text and JSON column of ToolOps' own tables (and the admin's audit log),
    except the two that hold sealed (encrypted) values."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() "
            "AND data_type IN ('text', 'character varying', 'json', 'jsonb') "
            "AND (table_name LIKE 'toolops\\_%%' OR table_name LIKE 'compensations\\_%%' "
            "OR table_name LIKE 'traces\\_%%' OR table_name = 'django_admin_log') "
            "AND table_name <> 'traces_sealedargs' "
            "AND NOT (table_name = 'toolops_toolcall' AND column_name = 'result_sealed')"
        )
        columns = cursor.fetchall()
        out = []
        for table, column in columns:
            cursor.execute(f'SELECT "{column}"::text FROM "{table}" WHERE "{column}" IS NOT NULL')
            out += [f"{table}.{column}: {value}" for (value,) in cursor.fetchall()]
    assert any(line.startswith("toolops_toolcall.args") for line in out)
    return "\n".join(out)


@contextmanager
def captured_logs() -> Iterator[io.StringIO]:
    """What the handlers settings.LOGGING installed write, with every SQL statement logged
    too (its parameters included): the strictest look at what could reach a log."""
    handlers = [
        h
        for h in logging.getLogger().handlers
        if any(isinstance(f, RedactingFilter) for f in h.filters)
    ]
    assert handlers, "settings.LOGGING installs the redacting filter on its handler"
    stream = io.StringIO()
    old = [h.setStream(stream) for h in handlers if isinstance(h, logging.StreamHandler)]
    sql = logging.getLogger("django.db.backends")
    level, debug_cursor = sql.level, connection.force_debug_cursor
    sql.setLevel(logging.DEBUG)
    connection.force_debug_cursor = True
    try:
        yield stream
    finally:
        sql.setLevel(level)
        connection.force_debug_cursor = debug_cursor
        for h, previous in zip(handlers, old, strict=False):
            h.setStream(previous)


def call(api: APIClient, step: int, tool: str, args: Any, expect: int = 200) -> dict[str, Any]:
    response = post_call(api, "r-sens", step_index=step, tool=tool, args=args)
    assert response.status_code == expect, response.content
    return body(response)


def test_nothing_sensitive_is_stored_shown_or_logged_and_the_agent_gets_its_result(
    api: APIClient, echo: Echo, shop: Shop, django_user_model: Any
) -> None:
    create_run(api, "r-sens", session_key="conv-9")
    with captured_logs() as logs:
        saved = call(api, 0, "save_profile", PROFILE)
        read = call(api, 1, "read_profile", SENSITIVE_ARGS)
        refused = call(api, 2, "reject_profile", SENSITIVE_ARGS)
        invalid = call(api, 3, "strict_profile", SENSITIVE_ARGS)
        held = call(api, 4, "charge", {"order_id": "ord-1", "amount": "5.00"}, expect=202)
        again = body(api.get(f"/api/v1/calls/{saved['call_id']}"))
        run = body(api.get("/api/v1/runs/r-sens"))
        # A line someone logs carelessly: e-mails and card numbers are scrubbed.
        logging.getLogger("toolops.test").warning("customer %s paid with %s", EMAIL, CARD)

    # The agent gets its own data back whole, now and on every later read.
    assert saved["status"] == "succeeded"
    assert saved["result"]["received"] == PROFILE
    assert API_KEY in saved["result"]["note"] and EMAIL in saved["result"]["note"]
    assert again["result"] == saved["result"]
    assert run["calls"][0]["result"] == saved["result"]
    assert read["result"]["received"] == SENSITIVE_ARGS
    # The downstream received the full args.
    assert echo.bodies("/echo")[0] == PROFILE
    # Errors quoting the args are redacted, for the agent too.
    assert refused["status"] == "failed" and refused["error"]["reason"] == "downstream_error"
    assert "cannot accept" in refused["error"]["message"]
    assert invalid["status"] == "failed" and invalid["error"]["reason"] == "invalid_args"
    assert "is not of type 'integer'" in invalid["error"]["message"]
    for answer in (refused, invalid):
        assert not leaks(answer["error"]["message"] + answer["feedback"]), answer
    assert held["status"] == "pending_approval"

    # Stored: redacted, with the full forms sealed.
    stored = stored_text()
    assert not leaks(stored)
    assert not [s for s in CATALOG_SECRETS if s in stored]
    row = ToolCall.objects.get(call_id=saved["call_id"])
    assert row.args["api_key"] == "[redacted]" and row.args["nickname"] == "[redacted]"
    assert row.args["contact"] == "[redacted email]" and row.args["payment"] == "[redacted card]"
    assert row.args["address"] == {"street": "[redacted]", "city": "Oslo"}
    assert row.result["received"]["api_key"] == "[redacted]" and row.result_sealed
    assert SealedArgs.objects.filter(pk=row.call_id).exists()
    # A call with nothing sensitive has no vault row and no sealed result.
    plain = ToolCall.objects.get(tool="charge")
    assert not SealedArgs.objects.filter(pk=plain.call_id).exists()

    # Logged: nothing (the SQL included), and the careless line scrubbed.
    text = logs.getvalue()
    assert "INSERT INTO" in text and "customer [redacted email] paid with [redacted card]" in text
    assert not leaks(text)

    # Shown: the run page, the held call's approval page (earlier steps are shown there),
    # and search.
    reviewer = make_user(django_user_model, "rita", "reviewers")
    operator = make_user(django_user_model, "olga", "operators")
    run_pk = Run.objects.get(run_id="r-sens").pk
    pages = [
        logged_in(operator).get(f"/console/runs/{run_pk}/"),
        logged_in(reviewer).get(held["approval"]["url"]),
        logged_in(operator).get("/console/search/?q=r-sens", follow=True),
        logged_in(operator).get("/console/runs/?q=r-sens"),
    ]
    for page in pages:
        assert page.status_code == 200
        assert not leaks(page.content.decode()), page.request["PATH_INFO"]
    assert "[redacted" in pages[0].content.decode()
    # The approval page shows the held call redacted like every page: no look to audit.
    assert not READS.filter(object_id=held["call_id"]).exists()


def test_a_result_failing_its_schema_does_not_quote_its_secrets(api: APIClient, echo: Echo) -> None:
    create_run(api, "r-sens")

    opened = call(api, 0, "open_account", {"holder": "Ann"})

    # The schema's verdict quotes the value; the value was redacted from the result.
    assert opened["status"] == "degraded" and opened["error"]["reason"] == "result_invalid"
    assert "is not of type 'integer'" in opened["error"]["message"]
    assert not leaks(opened["error"]["message"] + opened["feedback"]), opened
    assert not leaks(stored_text())
    # The agent still gets its own result whole.
    assert opened["result"]["iban"] == IBAN


def test_a_retried_call_sends_the_full_args_each_time(api: APIClient, echo: Echo) -> None:
    create_run(api, "r-sens")
    echo.plan("/echo", 503, 200)

    saved = call(api, 0, "save_profile", SENSITIVE_ARGS)

    assert saved["status"] == "succeeded" and saved["attempts"] == 2
    assert echo.bodies("/echo") == [SENSITIVE_ARGS, SENSITIVE_ARGS]
    errors = [a.error for a in ToolCall.objects.get(call_id=saved["call_id"]).attempt_rows.all()]
    assert "cannot accept" in errors[0] and not leaks(" ".join(errors))


def test_a_call_taken_over_from_a_dead_holder_sends_the_full_args(
    api: APIClient, echo: Echo
) -> None:
    create_run(api, "r-sens")
    # The holder dies after its claim and call row committed, before anything was sent.
    died = patch.object(Execution, "run_attempts", autospec=True, side_effect=RuntimeError)
    with died, pytest.raises(RuntimeError):
        post_call(api, "r-sens", step_index=0, tool="save_profile", args=SENSITIVE_ARGS)
    assert echo.bodies("/echo") == []
    held = ToolCall.objects.get(tool="save_profile")
    assert held.args["api_key"] == "[redacted]"
    IdempotencyRecord.objects.filter(key=held.idempotency_key).update(
        lease_until=timezone.now() - timedelta(seconds=1)
    )

    recovered = recover_stale_claim(key=held.idempotency_key)

    assert recovered is not None and recovered.status == "succeeded"
    assert echo.bodies("/echo") == [SENSITIVE_ARGS]
    held.refresh_from_db()
    assert not leaks(str(held.result)) and held.result_sealed


def test_a_call_read_back_sends_its_own_args_not_those_of_a_call_alike(
    api: APIClient, echo: Echo
) -> None:
    create_run(api, "r-sens")
    # The same args once normalised (strings stripped): one args hash, one idempotency
    # digest — but each call must send exactly what its agent sent.
    first = {**SENSITIVE_ARGS, "memo": "  hello  "}
    second = {**SENSITIVE_ARGS, "memo": "hello"}
    assert call(api, 0, "save_profile", first)["status"] == "succeeded"
    died = patch.object(Execution, "run_attempts", autospec=True, side_effect=RuntimeError)
    with died, pytest.raises(RuntimeError):
        post_call(api, "r-sens", step_index=1, tool="save_profile", args=second)
    held = ToolCall.objects.get(tool="save_profile", step_index=1)
    assert held.args_digest == ToolCall.objects.get(step_index=0).args_digest
    IdempotencyRecord.objects.filter(key=held.idempotency_key).update(
        lease_until=timezone.now() - timedelta(seconds=1)
    )

    recover_stale_claim(key=held.idempotency_key)

    assert echo.bodies("/echo") == [first, second]


def test_a_reconciled_call_asks_with_the_full_args_and_keeps_the_result_sealed(
    api: APIClient, echo: Echo
) -> None:
    create_run(api, "r-sens")
    echo.plan("/pay", 502)  # an unsafe write: its outcome is unknown
    echo.plan("/find", 503, 503)  # and the look right after it fails

    paid = call(api, 0, "pay", SENSITIVE_ARGS)

    assert paid["status"] == "unknown"
    ToolCall.objects.filter(call_id=paid["call_id"]).update(next_reconcile_at=timezone.now())
    row = ToolCall.objects.get(call_id=paid["call_id"])
    assert call_reconcile(call_pk=row.pk) == "succeeded"
    # The worker's look used the business key from the sealed args.
    assert echo.bodies("/find")[-1] == {"contact": EMAIL, "payment": CARD}
    row.refresh_from_db()
    assert not leaks(str(row.result)) and row.result_sealed
    assert not leaks(stored_text())
    # The agent reads its found result whole.
    assert body(api.get(f"/api/v1/calls/{paid['call_id']}"))["result"]["received"] == {
        "contact": EMAIL,
        "payment": CARD,
    }


def test_an_approved_call_sends_the_full_args_the_reviewer_saw(
    api: APIClient, shop: Shop, django_user_model: Any
) -> None:
    create_run(api, "r-sens")
    args = {
        "order_id": "ord-7",
        "amount": "5.00",
        "card_number": CARD,
        "receipt_to": EMAIL,
        "api_key": API_KEY,
    }
    held = call(api, 0, "charge", args, expect=202)
    reviewer = make_user(django_user_model, "rita", "reviewers")

    page = logged_in(reviewer).get(held["approval"]["url"]).content.decode()
    assert not leaks(page) and not READS.exists()

    # The reviewer judges what would be sent: "Show the full args", audited.
    full = f"/console/calls/{held['call_id']}/args/"
    assert f'href="{full}">Show the full args</a>' in page
    page = logged_in(reviewer).get(full).content.decode()
    assert CARD in page and EMAIL in page and API_KEY in page
    assert "Your look has been recorded" in page
    read = READS.get(object_id=held["call_id"])
    assert read.detail["purpose"] == "approval" and read.actor == reviewer
    approval = Approval.objects.get(approval_id=held["approval"]["approval_id"])
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        approval_decide(
            approval=approval,
            by=reviewer,
            approve=True,
            note=f"ok, card {CARD} checked",
            args_hash=approval.args_hash,
        )

    assert execute_approved_call(approval.pk) == "succeeded"

    assert shop.requests("/payments/charges")[0]["body"]["card_number"] == CARD
    assert shop.requests("/payments/charges")[0]["body"]["api_key"] == API_KEY
    assert not leaks(stored_text())
    # Decided, the page shows the call redacted like any other, and audits nothing more.
    page = logged_in(reviewer).get(held["approval"]["url"]).content.decode()
    assert not leaks(page)
    assert READS.count() == 1


def test_an_undo_is_mapped_from_the_full_args_and_result(api: APIClient, echo: Echo) -> None:
    create_run(api, "r-sens")
    done = call(api, 0, "subscribe", SENSITIVE_ARGS)
    assert done["status"] == "succeeded"
    compensation = Compensation.objects.get()
    # Stored redacted: by pattern (the e-mail) and by key name (api_key, card).
    assert compensation.args == {
        "contact": "[redacted email]",
        "api_key": "[redacted]",
        "card": "[redacted]",
    }
    assert api.post("/api/v1/runs/r-sens/abort", {"reason": "no"}, format="json").status_code == 202

    while compensation_run_next(run_pk=compensation.run_id):
        pass

    assert echo.bodies("/undo") == [{"contact": EMAIL, "api_key": API_KEY, "card": CARD}]
    assert not leaks(stored_text())


def test_what_people_write_about_a_run_and_its_tickets_is_kept_redacted(
    api: APIClient, echo: Echo, django_user_model: Any
) -> None:
    from compensations.desk import ticket_comment, ticket_resolve
    from toolops.services import run_abort_audited

    create_run(api, "r-sens")
    assert call(api, 0, "subscribe", SENSITIVE_ARGS)["status"] == "succeeded"
    echo.plan("/undo", 422)  # the undo fails: a ticket for support
    # About no one call: e-mail addresses and card numbers are scrubbed.
    said = f"customer {EMAIL} paid with {CARD}"
    aborted = api.post("/api/v1/runs/r-sens/abort", {"reason": said}, format="json")
    assert aborted.status_code == 202
    while compensation_run_next(run_pk=Run.objects.get(run_id="r-sens").pk):
        pass
    ticket = Compensation.objects.get().ticket
    support = make_user(django_user_model, "sam", "support")

    # About the call it undoes: that call's sensitive values are scrubbed too.
    ticket_comment(ticket=ticket, by=support, text=f"called {EMAIL}; their key is {API_KEY}")
    ticket_resolve(ticket=ticket, by=support, note=f"refunded card {CARD} by hand")
    # An operator's abort from the console is audited with its reason.
    create_run(api, "r-other")
    operator = make_user(django_user_model, "olga", "operators")
    run_abort_audited(run=Run.objects.get(run_id="r-other"), reason=said, by=operator)

    assert Run.objects.get(run_id="r-sens").end_reason == (
        "customer [redacted email] paid with [redacted card]"
    )
    assert not leaks(stored_text())
    run_page = logged_in(operator).get(f"/console/runs/{Run.objects.get(run_id='r-sens').pk}/")
    assert not leaks(run_page.content.decode())


@pytest.mark.parametrize(
    "args",
    [
        f'{{"contact": "{EMAIL}", "payment": "{CARD}", "api_key": "{API_KEY}"',  # not JSON
        f'["{EMAIL}", "{CARD}", "{API_KEY}"]',  # JSON, but not an object
    ],
)
def test_args_that_cannot_be_read_leak_nothing(api: APIClient, echo: Echo, args: str) -> None:
    create_run(api, "r-sens")

    answer = call(api, 0, "save_profile", args)

    assert answer["status"] == "failed" and answer["error"]["reason"] == "invalid_args"
    assert not leaks(answer["error"]["message"] + answer["feedback"])
    assert not leaks(stored_text())
    assert echo.bodies("/echo") == []


@pytest.mark.parametrize(
    "fields",
    [
        {"step_index": 0, "tool": "save_profile", "args": [EMAIL, CARD, API_KEY]},
        {"step_index": 0, "tool": "save_profile", "args": SENSITIVE_ARGS, "depends_on": [EMAIL]},
        {"step_index": -1, "tool": "save_profile", "args": SENSITIVE_ARGS},
    ],
)
def test_a_refused_request_quotes_no_args(
    api: APIClient, echo: Echo, fields: dict[str, Any]
) -> None:
    create_run(api, "r-sens")

    response = post_call(api, "r-sens", **fields)

    assert response.status_code == 400
    assert not leaks(response.content.decode())
    assert not ToolCall.objects.exists()


def test_a_person_settling_an_unknown_call_is_kept_redacted(api: APIClient, echo: Echo) -> None:
    from toolops.executor.settle import call_settle

    create_run(api, "r-sens")
    echo.plan("/pay", 502)
    echo.plan("/find", 503, 503)
    paid = call(api, 0, "pay", SENSITIVE_ARGS)
    row = ToolCall.objects.get(call_id=paid["call_id"])

    assert call_settle(
        call=row,
        by=None,
        succeeded=True,
        note=f"asked {EMAIL}: key {API_KEY} ok",
        result={"card": CARD, "receipt": f"sent to {EMAIL}"},
    )

    assert not leaks(stored_text())
    assert body(api.get(f"/api/v1/calls/{paid['call_id']}"))["result"]["card"] == CARD
