"""An approval's page, facts first: the call's catalog title and display facts, what
Approve does and which undo exists, the conversation's earlier calls from every run of its
session (with links), and the technical ids folded away but still on the page."""

# ruff: noqa: F811

from __future__ import annotations

from typing import Any

import pytest

from tests.console.conftest import (  # noqa: F401 - fixtures shared with the console tests
    fast_password_hashing,
    logged_in,
    make_call,
    make_run,
    reviewer,
)
from tests.console.facts_catalog import CHARGE, facts_catalog  # noqa: F401
from toolops.models import Agent

from .test_console import hold, url

pytestmark = pytest.mark.django_db


def _before(page: str, marker: str) -> str:
    return page[: page.index(marker)]


def test_a_charge_reads_by_its_facts_and_says_which_undo_exists(
    reviewer: Any, agent_a: tuple[Agent, str], facts_catalog: Any
) -> None:
    run = make_run(agent_a[0], "r-charge")
    approval = hold(run, "tc-1", "charge", CHARGE)

    page = logged_in(reviewer).get(url(approval)).content.decode()

    assert "Charge 89.00 EUR to customer cus_42 for order ord_1" in page
    facts = page[page.index('class="facts call-facts"') :]
    assert "<dt>Currency</dt><dd>EUR</dd>" in facts and "<dt>Customer</dt><dd>cus_42</dd>" in facts
    assert "Approve runs charge now." in page
    assert "Only refund can undo charge: ToolOps runs it if the run is abandoned." in page
    assert "cannot be undone" not in page
    assert "Waiting <time" in page and "just now" in page
    # The ids stay visible (API.md), the raw args and the jargon are folded away.
    assert '<code class="run-id">r-charge</code>' in page
    assert '<code class="tool-call-id">tc-1</code>' in page
    shown = _before(page, '<details class="card technical"')
    assert "args hash" not in shown and "&quot;amount&quot;" not in shown
    technical = page[page.index('<details class="card technical"') :]
    assert '<abbr title="' in technical and "args hash" in technical
    assert "&quot;amount&quot;: &quot;89.00&quot;" in technical


def test_the_queue_titles_a_charge_and_names_its_undo(
    reviewer: Any, agent_a: tuple[Agent, str], facts_catalog: Any
) -> None:
    hold(make_run(agent_a[0], "r-charge"), "tc-1", "charge", CHARGE)

    page = logged_in(reviewer).get("/console/approvals/").content.decode()

    row = page[page.index('class="approval-row') :]
    row = row[: row.index("</tr>")]
    assert "Charge 89.00 EUR to customer cus_42 for order ord_1" in row
    assert "undone only by refund" in row and "cannot be undone" not in row.lower()


def test_a_tool_without_an_undo_says_it_cannot_be_undone(
    reviewer: Any, agent_a: tuple[Agent, str], facts_catalog: Any
) -> None:
    run = make_run(agent_a[0], "r-message")
    approval = hold(run, "tc-1", "send_notification", {"to": "x@example.com", "message": "hi"})

    page = logged_in(reviewer).get(url(approval)).content.decode()

    assert "Send a message to [redacted email]" in page
    assert (
        "Approve runs send_notification now. send_notification cannot be undone: nothing "
        "takes it back once it has run." in page
    )
    assert "cannot be undone</span>" in page  # the reason's badge


def test_it_shows_the_conversations_earlier_calls_from_every_run_of_its_session(
    reviewer: Any, agent_a: tuple[Agent, str], agent_b: tuple[Agent, str], facts_catalog: Any
) -> None:
    ordering = make_run(agent_a[0], "r-order", session_key="conv-7")
    order = make_call(
        ordering,
        "tc-1",
        0,
        "create_order",
        "succeeded",
        args={"sku": "A12", "qty": 2},
        result={"order_id": "ord_1"},
    )
    failed = make_call(
        ordering,
        "tc-2",
        1,
        "create_order",
        "failed",
        args={"sku": "B7"},
        error_message="HTTP 503: injected_fault",
    )
    # Another agent's conversation that happens to use the same key is not this one.
    make_call(
        make_run(agent_b[0], "r-stranger", session_key="conv-7"),
        "tc-9",
        0,
        "create_order",
        "succeeded",
        args={"sku": "ZZ9", "qty": 1},
    )
    run = make_run(agent_a[0], "r-charge", session_key="conv-7")
    approval = hold(run, "tc-1", "charge", CHARGE, step_index=0)
    # Made after the held call, in another run: not earlier.
    make_call(ordering, "tc-3", 2, "create_order", "succeeded", args={"sku": "LATE", "qty": 1})

    page = logged_in(reviewer).get(url(approval)).content.decode()

    earlier = page[page.index("Earlier in this conversation (2)") :]
    assert earlier.index("Order 2 × A12") < earlier.index("Order — × B7")
    assert f'href="/console/calls/{order.call_id}/"' in earlier
    assert f'href="/console/calls/{failed.call_id}/"' in earlier
    assert f'href="/console/runs/{ordering.pk}/" class="other-run"><code>r-order</code>' in earlier
    assert "The orders service answered 503 (unavailable)" in earlier
    assert "ZZ9" not in page and "r-stranger" not in page and "LATE" not in page


def test_the_decide_box_is_one_form_with_both_notes(
    reviewer: Any, agent_a: tuple[Agent, str], facts_catalog: Any
) -> None:
    approval = hold(make_run(agent_a[0], "r-forms"), "tc-1", "charge", CHARGE)

    page = logged_in(reviewer).get(url(approval)).content.decode()

    # One form: the server sees a reason typed to reject even when Approve is pressed.
    assert page.count('class="decide-form"') == 1
    form = page[page.index('class="decide-form"') :]
    form = form[: form.index("</form>")]
    assert 'value="approve"' in form and 'value="reject"' in form
    assert 'name="note" id="approve-note"' in form
    assert 'name="reject_reason" id="approval-note"' in form
    # The confirmation's field is sent by the dialog's own button only.
    assert '<input type="hidden" name="confirmed" value="1" disabled>' in form
    assert "<kbd>Ctrl</kbd>+<kbd>Enter</kbd> rejects" in page
    assert "no key approves" in page
